package delivery

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/partnerstream/partnerstream/internal/run"
)

// targetLimiter counts the attempts in flight per target in this process.
type targetLimiter struct {
	limit    int
	mu       sync.Mutex
	inflight map[string]int
}

func newTargetLimiter(limit int) *targetLimiter {
	return &targetLimiter{limit: limit, inflight: map[string]int{}}
}

func (l *targetLimiter) acquire(target string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.inflight[target]++
}

func (l *targetLimiter) release(target string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.inflight[target]--; l.inflight[target] <= 0 {
		delete(l.inflight, target)
	}
}

// busy returns the targets with attempts in flight and how many each has.
func (l *targetLimiter) busy() ([]string, []int32) {
	l.mu.Lock()
	defer l.mu.Unlock()
	targets, counts := make([]string, 0, len(l.inflight)), make([]int32, 0, len(l.inflight))
	for t, n := range l.inflight {
		targets, counts = append(targets, t), append(counts, int32(n))
	}
	return targets, counts
}

// claimSQL claims up to $3 due deliveries, oldest first, at most $4 in flight per target
// (counting the targets' attempts already in flight here, $5 and $6). Targets already at the
// limit are skipped by the scan itself, so that a backlog of one target cannot fill the
// window and starve the others. Only the picked rows are locked (locking the whole window
// would write every row of it): SKIP LOCKED passes over rows another worker is claiming,
// and the due condition, checked again on the locked row, over rows it has just claimed.
// Claiming moves next_attempt_at to the end of the lease ($7): other workers skip the rows
// until then, and get them back if this one dies.
const claimSQL = `
WITH cand AS (
    SELECT d.id, d.target_id, d.next_attempt_at
    FROM deliveries d
    WHERE d.status = 'pending' AND d.next_attempt_at <= $1 AND NOT (d.target_id = ANY($2::text[]))
    ORDER BY d.next_attempt_at
    LIMIT $3 * 4
), ranked AS (
    SELECT c.id, c.next_attempt_at,
           row_number() OVER (PARTITION BY c.target_id ORDER BY c.next_attempt_at, c.id) AS rn,
           $4 - coalesce(b.inflight, 0) AS room
    FROM cand c LEFT JOIN unnest($5::text[], $6::int[]) AS b(target_id, inflight) ON b.target_id = c.target_id
), pick AS (
    SELECT id FROM ranked WHERE rn <= room ORDER BY next_attempt_at LIMIT $3
), locked AS (
    SELECT d.id FROM deliveries d JOIN pick ON pick.id = d.id
    WHERE d.status = 'pending' AND d.next_attempt_at <= $1
    FOR UPDATE OF d SKIP LOCKED
)
UPDATE deliveries d SET next_attempt_at = $7
FROM locked WHERE d.id = locked.id
RETURNING d.id, d.company_id, d.kind, d.target_id, d.url, d.event_type, d.body, d.attempts, d.next_trigger`

// claim claims up to limit due deliveries for this process.
func (s *Service) claim(ctx context.Context, limit int) ([]job, error) {
	if err := s.refreshBreakers(ctx); err != nil && ctx.Err() == nil {
		s.o.Log.Warn("reading the circuit breakers failed; using the last known ones", "err", err)
	}
	now := s.o.Now()
	leaseEnd := now.Add(s.o.Lease)
	targets, counts := s.limit.busy()
	full := []string{} // not nil: a NULL array would exclude every target
	for i, n := range counts {
		if int(n) >= s.o.PerTarget {
			full = append(full, targets[i])
		}
	}
	rows, err := s.o.DB.Query(ctx, claimSQL, now, full, limit, s.o.PerTarget, targets, counts, leaseEnd)
	if err != nil {
		return nil, fmt.Errorf("claim due deliveries: %w", err)
	}
	jobs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (job, error) {
		j := job{leaseEnd: leaseEnd}
		err := r.Scan(&j.id, &j.companyID, &j.kind, &j.targetID, &j.url, &j.eventType, &j.body, &j.attempts, &j.trigger)
		return j, err
	})
	if err != nil {
		return nil, fmt.Errorf("claim due deliveries: %w", err)
	}
	return jobs, nil
}

// saveSQL records attempts and the state of their deliveries in one statement. A delivery
// is updated only if it still has the attempts it had when claimed: a worker that outlived
// its lease, whose row another worker claimed and attempted meanwhile, records nothing.
const saveSQL = `
WITH r AS (
    SELECT * FROM unnest($1::text[], $2::int[], $3::text[], $4::timestamptz[], $5::text[], $6::timestamptz[],
                         $7::int[], $8::int[], $9::text[], $10::text[])
        AS r(id, n, status, next_at, trigger, started_at, duration_ms, status_code, error, excerpt)
), done AS (
    UPDATE deliveries d
    SET status = r.status, attempts = r.n, next_attempt_at = r.next_at, next_trigger = 'scheduled',
        last_status = r.status_code, last_error = r.error, updated_at = $11
    FROM r
    WHERE d.id = r.id AND d.attempts = r.n - 1 AND d.status = 'pending'
    RETURNING d.id
)
INSERT INTO delivery_attempts (delivery_id, n, trigger, started_at, duration_ms, status_code, error, response_excerpt)
SELECT r.id, r.n, r.trigger, r.started_at, r.duration_ms, r.status_code, r.error, r.excerpt
FROM r JOIN done ON done.id = r.id`

// save records outcomes; it returns how many were recorded (the others were stale).
func (s *Service) save(ctx context.Context, all []outcome) (int, error) {
	var outs, held []outcome
	for _, o := range all {
		if o.held {
			held = append(held, o)
		} else {
			outs = append(outs, o)
		}
	}
	if err := s.hold(ctx, held); err != nil {
		return 0, err
	}
	n := len(outs)
	if n == 0 {
		return 0, nil
	}
	var (
		ids, statuses, triggers []string
		attempts, durations     = make([]int32, n), make([]int32, n)
		nexts                   = make([]*time.Time, n)
		started                 = make([]time.Time, n)
		codes                   = make([]*int32, n)
		errs, excerpts          = make([]*string, n), make([]*string, n)
	)
	for i, o := range outs {
		ids, statuses, triggers = append(ids, o.job.id), append(statuses, o.status), append(triggers, o.job.trigger)
		attempts[i], durations[i], started[i] = int32(o.n), int32(o.duration.Milliseconds()), o.startedAt
		if o.status == StatusPending {
			nexts[i] = &o.next
		}
		if o.statusCode != 0 {
			c := int32(o.statusCode)
			codes[i] = &c
		}
		if o.err != "" {
			errs[i] = &o.err
		}
		if o.excerpt != "" {
			excerpts[i] = &o.excerpt
		}
	}
	tag, err := s.o.DB.Exec(ctx, saveSQL, ids, attempts, statuses, nexts, triggers, started, durations, codes, errs, excerpts, s.o.Now())
	if err != nil {
		return 0, fmt.Errorf("record %d attempts: %w", n, err)
	}
	return int(tag.RowsAffected()), nil
}

// hold makes held deliveries due when their target's breaker lets them be tried again,
// without an attempt, and says why in their last error.
func (s *Service) hold(ctx context.Context, held []outcome) error {
	if len(held) == 0 {
		return nil
	}
	ids, attempts, until, why := make([]string, len(held)), make([]int32, len(held)), make([]time.Time, len(held)), make([]string, len(held))
	for i, o := range held {
		ids[i], attempts[i], until[i], why[i] = o.job.id, int32(o.job.attempts), o.next, o.err
	}
	_, err := s.o.DB.Exec(ctx, `UPDATE deliveries d SET next_attempt_at = r.until, last_error = r.why, updated_at = $5
FROM unnest($1::text[], $2::int[], $3::timestamptz[], $4::text[]) AS r(id, attempts, until, why)
WHERE d.id = r.id AND d.attempts = r.attempts AND d.status = 'pending'`, ids, attempts, until, why, s.o.Now())
	if err != nil {
		return fmt.Errorf("hold %d deliveries of open circuit breakers: %w", len(held), err)
	}
	// The target's other due deliveries wait as well, in one statement rather than a claim
	// each: a receiver dead for hours can have thousands.
	type heldTarget struct {
		company string
		target
	}
	seen := map[heldTarget]bool{}
	for _, o := range held {
		k := heldTarget{o.job.companyID, target{o.job.kind, o.job.targetID}}
		if seen[k] {
			continue
		}
		seen[k] = true
		if _, err := s.o.DB.Exec(ctx, `UPDATE deliveries SET next_attempt_at = $5, last_error = $6, updated_at = $4
WHERE company_id = $1 AND kind = $2 AND target_id = $3 AND status = 'pending' AND next_attempt_at <= $4`,
			k.company, k.kind, k.id, s.o.Now(), o.next, o.err); err != nil {
			return fmt.Errorf("hold the due deliveries of %s %s: %w", k.kind, k.id, err)
		}
	}
	return nil
}

// saveLinger is how long finished attempts wait for others to be recorded together.
const saveLinger = 5 * time.Millisecond

// saveBatch is the most attempts recorded by one statement.
const saveBatch = 500

// dispatch claims due deliveries and runs their attempts until ctx ends; then it lets the
// claimed attempts finish and records them.
//
// Up to ClaimBatch claimed deliveries wait in memory beyond the Workers attempts in flight,
// so workers never wait for a claim and claims are big: claiming after every finished
// attempt would make one query per attempt or so.
func (s *Service) dispatch(ctx context.Context) error {
	capacity := s.o.Workers + s.o.ClaimBatch
	jobs := make(chan job, capacity)
	outs := make(chan outcome, s.o.Workers)
	var (
		workers   sync.WaitGroup
		mu        sync.Mutex
		unstarted []job // claimed, not started before shutdown: released below
	)
	for range s.o.Workers {
		workers.Add(1)
		go func() {
			defer workers.Done()
			for j := range jobs {
				switch {
				case ctx.Err() != nil:
					mu.Lock()
					unstarted = append(unstarted, j)
					mu.Unlock()
				case s.o.Now().Add(s.sender.timeout).After(j.leaseEnd):
					// Its lease would end during the attempt, and another worker may claim
					// it then: leave it to that one.
				default:
					// An attempt started is finished (it is bounded by the attempt
					// timeout) and recorded, also during shutdown.
					o := s.attempt(context.WithoutCancel(ctx), j)
					if hook := s.afterAttempt; hook != nil {
						hook(o)
					}
					outs <- o
				}
				s.limit.release(j.targetID)
				s.inflight.Add(-1)
				signal(s.freed)
			}
		}()
	}
	saved := make(chan struct{})
	go func() { defer close(saved); s.saveLoop(outs) }()

	s.claimLoop(ctx, jobs, capacity)
	close(jobs)
	workers.Wait()
	close(outs)
	<-saved
	if err := s.release(unstarted); err != nil {
		s.o.Log.Warn("releasing claimed deliveries failed; they come back when their lease ends", "deliveries", len(unstarted), "err", err)
	}
	return nil
}

// release makes claimed deliveries that were not attempted due again at once, rather than
// at the end of their lease.
func (s *Service) release(jobs []job) error {
	if len(jobs) == 0 {
		return nil
	}
	ids, attempts := make([]string, len(jobs)), make([]int32, len(jobs))
	for i, j := range jobs {
		ids[i], attempts[i] = j.id, int32(j.attempts)
	}
	ctx, cancel := context.WithTimeout(context.Background(), finalStoreTimeout)
	defer cancel()
	_, err := s.o.DB.Exec(ctx, `UPDATE deliveries d SET next_attempt_at = $3
FROM unnest($1::text[], $2::int[]) AS r(id, attempts)
WHERE d.id = r.id AND d.attempts = r.attempts AND d.status = 'pending'`, ids, attempts, s.o.Now())
	if err != nil {
		return fmt.Errorf("release %d claimed deliveries: %w", len(jobs), err)
	}
	return nil
}

func (s *Service) claimLoop(ctx context.Context, jobs chan<- job, capacity int) {
	// Claim once half a batch is free (or everything, if that is less).
	threshold := max(min(s.o.ClaimBatch, capacity)/2, 1)
	failures := 0
	poll := time.NewTimer(0)
	defer poll.Stop()
	for ctx.Err() == nil {
		free := capacity - int(s.inflight.Load())
		moreDue := false
		if free >= threshold {
			want := min(free, s.o.ClaimBatch)
			claimed, err := s.claim(ctx, want)
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				failures++
				s.o.Log.Error("claiming deliveries failed; retrying", "err", err)
				run.Sleep(ctx, run.Backoff(failures))
				continue
			}
			failures = 0
			for _, j := range claimed {
				s.inflight.Add(1)
				s.limit.acquire(j.targetID)
				jobs <- j
			}
			// More may be due (a claim can stop short at the per-target limits): claim
			// again once enough is free, until a claim finds nothing.
			moreDue = len(claimed) > 0
		}
		if !poll.Stop() {
			select {
			case <-poll.C:
			default:
			}
		}
		poll.Reset(s.o.PollInterval)
		if free >= threshold && !moreDue {
			// Nothing more is due: wait for new deliveries or the next poll.
			select {
			case <-ctx.Done():
			case <-s.wake:
			case <-poll.C:
			}
			continue
		}
		select {
		case <-ctx.Done():
		case <-s.freed:
		case <-poll.C:
		}
	}
}

// saveLoop records finished attempts in batches until outs is closed and drained. A batch
// that cannot be recorded is dropped after a few tries: its deliveries come back when their
// lease ends and are attempted again (at least once, never lost).
func (s *Service) saveLoop(outs <-chan outcome) {
	batch := make([]outcome, 0, saveBatch)
	flush := func() {
		for try := 1; len(batch) > 0; try++ {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_, err := s.save(ctx, batch)
			if err == nil {
				if err := s.recordHealth(ctx, batch); err != nil {
					s.o.Log.Warn("recording the targets' health failed", "err", err)
				}
				cancel()
				break
			}
			cancel()
			s.o.Log.Error("recording attempts failed", "attempts", len(batch), "try", try, "err", err)
			if try == 3 {
				break
			}
			time.Sleep(run.Backoff(try))
		}
		batch = batch[:0]
	}
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		select {
		case o, ok := <-outs:
			if !ok {
				flush()
				return
			}
			batch = append(batch, o)
			if len(batch) == 1 {
				timer.Reset(saveLinger)
			}
			if len(batch) >= saveBatch {
				timer.Stop()
				flush()
			}
		case <-timer.C:
			flush()
		}
	}
}

// gaugeInterval is how often the backlog gauges are refreshed.
const gaugeInterval = 10 * time.Second

// refreshGauges keeps the pending, retry and oldest-pending gauges until ctx ends.
func (s *Service) refreshGauges(ctx context.Context) {
	t := time.NewTicker(gaugeInterval)
	defer t.Stop()
	for {
		if err := s.updateGauges(ctx); err != nil && ctx.Err() == nil {
			s.o.Log.Warn("counting pending deliveries failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (s *Service) updateGauges(ctx context.Context) error {
	var pending, retries int64
	var oldest float64
	err := s.o.DB.QueryRow(ctx, `
SELECT count(*), count(*) FILTER (WHERE attempts > 0),
       coalesce(extract(epoch FROM $1 - min(next_attempt_at) FILTER (WHERE next_attempt_at <= $1)), 0)::float8
FROM deliveries WHERE status = 'pending'`, s.o.Now()).Scan(&pending, &retries, &oldest)
	if err != nil {
		return fmt.Errorf("count pending deliveries: %w", err)
	}
	pendingGauge.Set(float64(pending))
	retriesGauge.Set(float64(retries))
	oldestPendingAge.Set(max(oldest, 0))
	return nil
}
