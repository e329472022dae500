package conversions

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/partnerstream/partnerstream/internal/fraud"
	"github.com/partnerstream/partnerstream/internal/run"
)

// ClickReader reads conversions' clicks as ingest stored them in ClickHouse
// (fraud.ClickStore). A click that is not there (yet) is absent from the answer.
type ClickReader interface {
	Clicks(ctx context.Context, keys []fraud.ClickKey) (map[string]fraud.Click, error)
}

// DefaultClickTimeout bounds the read of a conversion's click at registration: a click
// ClickHouse does not give by then is decided by the late-click loop instead, so a slow
// ClickHouse never slows registration by more.
const DefaultClickTimeout = 50 * time.Millisecond

// MaxClickWait is how long the late-click loop waits for a conversion's click: ingest lags a
// second or so, and a click still missing after this (a ClickHouse that lost it, raw clicks
// past their retention) is given up, and its rules do not run.
const MaxClickWait = time.Hour

// lateClickBatch is how many waiting conversions one pass of the loop reads the clicks of,
// in one ClickHouse query.
const lateClickBatch = 500

// keyOf is the ClickHouse key of a conversion's click, with the program's velocity window.
func keyOf(advertiserID, programID, clickID string, at time.Time, rules fraud.Settings) fraud.ClickKey {
	k := fraud.ClickKey{AdvertiserID: advertiserID, ProgramID: programID, ClickID: clickID, At: at}
	if rules[fraud.ClickVelocity].Enabled {
		k.Window = time.Duration(rules[fraud.ClickVelocity].Seconds["window_seconds"]) * time.Second
	}
	return k
}

// readClick reads the conversion's click, the first touch that is one, within the click
// timeout; ok is false when there is none, no reader, or ClickHouse did not give it in time.
func (s *Service) readClick(ctx context.Context, advertiserID string, cands []touch, rules fraud.Settings) (fraud.Click, bool) {
	if s.clicks == nil || len(cands) == 0 || cands[0].kind != AttributionClick {
		return fraud.Click{}, false
	}
	k := cands[0].click
	ctx, cancel := context.WithTimeout(ctx, s.clickTTL)
	defer cancel()
	found, err := s.clicks.Clicks(ctx, []fraud.ClickKey{keyOf(advertiserID, k.ProgramID, k.ID, k.OccurredAt, rules)})
	if err != nil {
		return fraud.Click{}, false
	}
	click, ok := found[k.ID]
	return click, ok
}

// factsOf are the conversion's facts the custom rule reads.
func factsOf(c Conversion) fraud.Conversion {
	return fraud.Conversion{ProgramID: c.ProgramID, AffiliateID: c.AffiliateID, Type: c.Type, Amount: c.Amount,
		Currency: c.Currency, OccurredAt: c.OccurredAt}
}

// DecideLateClicks decides the click-stage rules of conversions registered before ClickHouse
// had their click: up to one batch of them, oldest first, with one read of ClickHouse. Each
// whose click is there now gets its click's country and device type and the rules' verdicts
// (a hold then puts the commission on hold, as AddVerdicts does); one waiting longer than
// MaxClickWait is given up. It returns how many it settled.
func (s *Service) DecideLateClicks(ctx context.Context) (int, error) {
	if s.clicks == nil {
		return 0, nil
	}
	type waiting struct {
		id, advertiserID, programID, clickID string
		clickedAt, createdAt                 time.Time
		rules                                fraud.Settings
	}
	rows, err := s.db.Query(ctx, `SELECT v.id, v.advertiser_id, v.program_id, v.click_id, v.clicked_at, v.created_at,
		(SELECT rules FROM fraud_settings WHERE program_id = v.program_id)
		FROM conversions v WHERE v.click_pending ORDER BY v.created_at LIMIT $1`, lateClickBatch)
	if err != nil {
		return 0, fmt.Errorf("read conversions awaiting their click: %w", err)
	}
	var list []waiting
	var keys []fraud.ClickKey
	var w waiting
	var raw []byte
	if _, err := pgx.ForEachRow(rows, []any{&w.id, &w.advertiserID, &w.programID, &w.clickID, &w.clickedAt, &w.createdAt, &raw}, func() error {
		var err error
		if w.rules, err = fraud.ParseStored(raw); err != nil {
			return err
		}
		list = append(list, w)
		keys = append(keys, keyOf(w.advertiserID, w.programID, w.clickID, w.clickedAt, w.rules))
		return nil
	}); err != nil {
		return 0, fmt.Errorf("read conversions awaiting their click: %w", err)
	}
	if len(list) == 0 {
		return 0, nil
	}
	found, err := s.clicks.Clicks(ctx, keys)
	if err != nil {
		return 0, err
	}
	settled := 0
	for _, w := range list {
		click, ok := found[w.clickID]
		if !ok && s.now().Sub(w.createdAt) < MaxClickWait {
			continue
		}
		if err := s.settleClick(ctx, w.id, click, ok, w.rules); err != nil {
			return settled, err
		}
		settled++
	}
	return settled, nil
}

// settleClick records a waiting conversion's click (known false: given up) and the click
// rules' verdicts, in one transaction.
func (s *Service) settleClick(ctx context.Context, conversionID string, click fraud.Click, known bool, rules fraud.Settings) error {
	err := pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		locked, err := lock(ctx, tx, `v.id = $1 AND v.click_pending`, conversionID)
		if err != nil || len(locked) == 0 {
			return err // another replica settled it
		}
		c := locked[0]
		if !known {
			_, err := tx.Exec(ctx, `UPDATE conversions SET click_pending = false WHERE id = $1`, c.ID)
			return err
		}
		var exempt []string
		if c.PartnershipID != "" {
			rows, err := tx.Query(ctx, `SELECT code FROM fraud_exemptions WHERE partnership_id = $1`, c.PartnershipID)
			if err != nil {
				return fmt.Errorf("read fraud exemptions: %w", err)
			}
			if exempt, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
				return fmt.Errorf("read fraud exemptions: %w", err)
			}
		}
		if _, err := tx.Exec(ctx, `UPDATE conversions SET click_pending = false, click_country = NULLIF($2, ''),
			click_device_type = NULLIF($3, '') WHERE id = $1`, c.ID, click.Country, click.DeviceType); err != nil {
			return fmt.Errorf("store the click of conversion %s: %w", c.ID, err)
		}
		c.Country, c.DeviceType = click.Country, click.DeviceType
		_, err = s.addVerdicts(ctx, tx, c, fraud.DecideClick(rules, exempt, click, factsOf(c), s.now()))
		return err
	})
	if err != nil {
		return fmt.Errorf("settle the click of conversion %s: %w", conversionID, err)
	}
	return nil
}

// LateClicks runs DecideLateClicks every second until ctx ends (in every api replica: two
// that read the same conversion settle it once, under its row lock).
type LateClicks struct {
	Service *Service
	Log     *slog.Logger
}

// Run decides until ctx is done.
func (l LateClicks) Run(ctx context.Context) {
	run.Every(ctx, time.Second, l.Log, "decide conversions' late clicks", func(ctx context.Context) error {
		for {
			n, err := l.Service.DecideLateClicks(ctx)
			if err != nil || n < lateClickBatch {
				return err
			}
		}
	})
}
