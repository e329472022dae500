package delivery

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// The circuit breaker of a target (docs/webhooks.md, "Dead receivers"): after
// breakerThreshold attempts in a row failed, the target's attempts are not sent for a
// cool-down but fail at once (they keep their schedule, so a delivery still has its three
// retries), and then one attempt at a time probes it. A failed probe opens it again for twice
// as long, up to breakerMaxCooldown; a success closes it. So a dead receiver holds at most one
// worker of the whole deployment instead of PerTarget per replica, each for the 15 s timeout.
const (
	breakerThreshold   = 5
	breakerCooldown    = 30 * time.Second
	breakerMaxCooldown = 5 * time.Minute
	// probeLease is how long a replica holds the probe of an open target: an attempt and
	// the time to record it.
	probeLease = attemptTimeout + 15*time.Second
)

// cooldown is how long a breaker stays open after failures consecutive failed attempts.
func cooldown(failures int) time.Duration {
	d := breakerCooldown
	for n := failures - breakerThreshold; n > 0 && d < breakerMaxCooldown; n-- {
		d *= 2
	}
	return min(d, breakerMaxCooldown)
}

// target names a delivery target: a webhook, or a company's postback URL.
type target struct{ kind, id string }

// breakers is this process's copy of the open breakers, read from Postgres before each
// claim, so a breaker opened by another replica's failures holds here too. newBreakers makes one.
type breakers struct {
	mu   sync.RWMutex
	open map[target]time.Time // open until
	// disabled are the postback URLs disabled for failing (disable.go).
	disabled map[target]bool
	// failures counts this process's failed attempts in a row per target, so that its own
	// attempts stop at the threshold before the shared state is recorded.
	failures map[target]int
}

// note counts an attempt this process sent to t, and opens t here at once when it made the
// failures in a row that open a breaker.
func (b *breakers) note(t target, ok bool, now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if ok {
		delete(b.failures, t)
		return
	}
	b.failures[t]++
	if n := b.failures[t]; n >= breakerThreshold {
		if _, open := b.open[t]; !open {
			b.open[t] = now.Add(cooldown(n))
		}
	}
}

func newBreakers() breakers {
	return breakers{open: map[target]time.Time{}, failures: map[target]int{}, disabled: map[target]bool{}}
}

func (b *breakers) openUntil(t target) (time.Time, bool) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	until, ok := b.open[t]
	return until, ok
}

func (b *breakers) isDisabled(t target) bool {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.disabled[t]
}

// set records what this process just decided for t, before the next refresh: the attempts it
// has claimed already see it.
func (b *breakers) set(t target, openUntil time.Time, failures int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	// The shared count includes this process's attempts recorded so far.
	if failures == 0 {
		delete(b.failures, t)
	} else {
		b.failures[t] = failures
	}
	if openUntil.IsZero() {
		delete(b.open, t)
		return
	}
	b.open[t] = openUntil
}

func (s *Service) refreshBreakers(ctx context.Context) error {
	rows, err := s.o.DB.Query(ctx, `SELECT kind, target_id, open_until, disabled_at IS NOT NULL FROM delivery_endpoints
WHERE open_until IS NOT NULL OR disabled_at IS NOT NULL`)
	if err != nil {
		return fmt.Errorf("read the open circuit breakers: %w", err)
	}
	open, disabled := map[target]time.Time{}, map[target]bool{}
	var t target
	var until *time.Time
	var off bool
	if _, err := pgx.ForEachRow(rows, []any{&t.kind, &t.id, &until, &off}, func() error {
		if until != nil {
			open[t] = *until
		}
		if off && t.kind == KindPostback {
			disabled[t] = true
		}
		return nil
	}); err != nil {
		return fmt.Errorf("read the open circuit breakers: %w", err)
	}
	s.breakers.mu.Lock()
	for t, n := range s.breakers.failures {
		// Opened here by this process's own failures, not recorded yet.
		if until, ok := s.breakers.open[t]; ok && n >= breakerThreshold {
			if _, stored := open[t]; !stored {
				open[t] = until
			}
		}
	}
	s.breakers.open, s.breakers.disabled = open, disabled
	openBreakers.Set(float64(len(open)))
	s.breakers.mu.Unlock()
	return nil
}

// heldError is the outcome of an attempt not made because its target's breaker is open: the
// delivery is held until then, without using one of its attempts.
type heldError struct{ until time.Time }

func (e *heldError) Error() string {
	return "held: the endpoint's circuit breaker is open after repeated failures; next try at " + e.until.UTC().Format(time.RFC3339)
}

// gate decides whether j's attempt is sent. A closed target's is. An open target's is only
// once the cool-down is over and this process takes the probe; otherwise it is held until the
// cool-down ends or the probe is decided.
func (s *Service) gate(ctx context.Context, j job, now time.Time) error {
	if s.breakers.isDisabled(target{j.kind, j.targetID}) {
		return errDisabled
	}
	until, open := s.breakers.openUntil(target{j.kind, j.targetID})
	if !open {
		return nil
	}
	if now.Before(until) {
		return &heldError{until: until}
	}
	var openUntil, probeUntil *time.Time
	var taken bool
	err := s.o.DB.QueryRow(ctx, `WITH e AS (
    SELECT kind, target_id, open_until, probe_until FROM delivery_endpoints WHERE kind = $1 AND target_id = $2 FOR UPDATE
), took AS (
    UPDATE delivery_endpoints d SET probe_until = $3 FROM e
    WHERE d.kind = e.kind AND d.target_id = e.target_id AND e.open_until <= $4 AND (e.probe_until IS NULL OR e.probe_until <= $4)
    RETURNING 1
)
SELECT e.open_until, e.probe_until, EXISTS (SELECT 1 FROM took) FROM e`, j.kind, j.targetID, now.Add(probeLease), now).Scan(&openUntil, &probeUntil, &taken)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil // no row: never failed
	case err != nil:
		return fmt.Errorf("read the circuit breaker: %w", err)
	case openUntil == nil || taken:
		return nil // closed meanwhile, or this is the probe
	case now.Before(*openUntil):
		return &heldError{until: *openUntil}
	}
	return &heldError{until: timeOrZero(probeUntil)} // another attempt is probing it
}

// endpoint is the stored health of a target.
type endpoint struct {
	failures                                                    int
	openUntil, lastSuccess, lastFailure, failingSince, disabled time.Time // zero: NULL
	notified                                                    time.Time
}

// observation is an attempt that was sent: when it started and whether it succeeded.
type observation struct {
	at time.Time
	ok bool
}

// observe returns the health of a target after attempts were sent to it, in the order they
// started. A sent attempt also means the target is active again if it was disabled: it starts
// counting afresh.
func (e endpoint) observe(obs []observation, now time.Time) endpoint {
	if !e.disabled.IsZero() {
		e = endpoint{lastSuccess: e.lastSuccess, lastFailure: e.lastFailure}
	}
	for _, o := range obs {
		if o.ok {
			e.failures, e.failingSince = 0, time.Time{}
			e.lastSuccess = later(e.lastSuccess, o.at)
			continue
		}
		e.failures++
		e.lastFailure = later(e.lastFailure, o.at)
		if e.failingSince.IsZero() {
			e.failingSince = o.at
		}
	}
	e.openUntil = time.Time{}
	if e.failures >= breakerThreshold {
		e.openUntil = now.Add(cooldown(e.failures))
	}
	return e
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// recordHealth updates the health of the targets of outs that were sent, in one transaction
// that serialises with other replicas recording the same targets.
func (s *Service) recordHealth(ctx context.Context, outs []outcome) error {
	type key struct {
		target
		company string
	}
	obs := map[key][]observation{}
	for _, o := range outs {
		if o.sent {
			k := key{target{o.job.kind, o.job.targetID}, o.job.companyID}
			obs[k] = append(obs[k], observation{at: o.startedAt, ok: o.status == StatusSucceeded})
		}
	}
	if len(obs) == 0 {
		return nil
	}
	now := s.o.Now()
	var kinds, targets, companies []string
	for k := range obs {
		kinds, targets, companies = append(kinds, k.kind), append(targets, k.id), append(companies, k.company)
	}
	return pgx.BeginFunc(ctx, s.o.DB, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO delivery_endpoints (kind, target_id, company_id, updated_at)
SELECT u.kind, u.target_id, u.company_id, $4 FROM unnest($1::text[], $2::text[], $3::text[]) AS u(kind, target_id, company_id)
JOIN companies c ON c.id = u.company_id
ORDER BY 1, 2
ON CONFLICT (kind, target_id) DO NOTHING`, kinds, targets, companies, now); err != nil {
			return fmt.Errorf("record endpoint health: %w", err)
		}
		rows, err := tx.Query(ctx, `SELECT e.kind, e.target_id, e.company_id, e.consecutive_failures, e.open_until, e.last_success_at,
       e.last_failure_at, e.failing_since, e.disabled_at, e.notified_at
FROM delivery_endpoints e JOIN unnest($1::text[], $2::text[]) AS u(kind, target_id) ON e.kind = u.kind AND e.target_id = u.target_id
ORDER BY 1, 2 FOR UPDATE OF e`, kinds, targets)
		if err != nil {
			return fmt.Errorf("record endpoint health: %w", err)
		}
		var (
			k                                                 key
			failures                                          int
			openUntil, success, failure, since, dis, notified *time.Time
			cols                                              endpointColumns
		)
		_, err = pgx.ForEachRow(rows, []any{&k.kind, &k.id, &k.company, &failures, &openUntil, &success, &failure, &since, &dis, &notified}, func() error {
			o := obs[k]
			slices.SortFunc(o, func(a, b observation) int { return a.at.Compare(b.at) })
			e := endpoint{failures: failures, openUntil: timeOrZero(openUntil), lastSuccess: timeOrZero(success), lastFailure: timeOrZero(failure),
				failingSince: timeOrZero(since), disabled: timeOrZero(dis), notified: timeOrZero(notified)}
			e = e.observe(o, now)
			cols.add(k.target, e)
			s.breakers.set(k.target, e.openUntil, e.failures)
			return nil
		})
		if err != nil {
			return fmt.Errorf("record endpoint health: %w", err)
		}
		if _, err := tx.Exec(ctx, `UPDATE delivery_endpoints e
SET consecutive_failures = u.failures, open_until = u.open_until, probe_until = NULL, last_success_at = u.last_success,
    last_failure_at = u.last_failure, failing_since = u.failing_since, disabled_at = u.disabled_at, notified_at = u.notified_at, updated_at = $10
FROM unnest($1::text[], $2::text[], $3::int[], $4::timestamptz[], $5::timestamptz[], $6::timestamptz[], $7::timestamptz[], $8::timestamptz[], $9::timestamptz[])
     AS u(kind, target_id, failures, open_until, last_success, last_failure, failing_since, disabled_at, notified_at)
WHERE e.kind = u.kind AND e.target_id = u.target_id`,
			cols.kinds, cols.targets, cols.failures, cols.openUntil, cols.lastSuccess, cols.lastFailure, cols.failingSince, cols.disabled, cols.notified, now); err != nil {
			return fmt.Errorf("record endpoint health: %w", err)
		}
		return nil
	})
}

// endpointColumns are endpoints as the columns of an UPDATE ... FROM unnest.
type endpointColumns struct {
	kinds, targets                                                        []string
	failures                                                              []int32
	openUntil, lastSuccess, lastFailure, failingSince, disabled, notified []*time.Time
}

func (c *endpointColumns) add(t target, e endpoint) {
	c.kinds, c.targets, c.failures = append(c.kinds, t.kind), append(c.targets, t.id), append(c.failures, int32(e.failures))
	c.openUntil, c.lastSuccess = append(c.openUntil, optionalTime(e.openUntil)), append(c.lastSuccess, optionalTime(e.lastSuccess))
	c.lastFailure, c.failingSince = append(c.lastFailure, optionalTime(e.lastFailure)), append(c.failingSince, optionalTime(e.failingSince))
	c.disabled, c.notified = append(c.disabled, optionalTime(e.disabled)), append(c.notified, optionalTime(e.notified))
}

func timeOrZero(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return *t
}
