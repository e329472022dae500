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

// clickReadTimeout bounds one read of a batch's clicks: a ClickHouse that does not answer
// by then is tried again at the next pass.
const clickReadTimeout = 10 * time.Second

// MaxClickWait is how long DecideClicks waits for a conversion's click: ingest lags a second
// or so, and a click still missing after this (a ClickHouse that lost it, an ingest down for
// longer) is given up, and the click rules do not run on its conversion.
const MaxClickWait = time.Hour

// clickBatch is how many waiting conversions one pass reads the clicks of, in one ClickHouse
// query (and one more for click_velocity).
const clickBatch = 500

// keyOf is the ClickHouse key of a conversion's click, with the program's velocity window.
func keyOf(advertiserID, programID, clickID string, at time.Time, rules fraud.Settings) fraud.ClickKey {
	k := fraud.ClickKey{AdvertiserID: advertiserID, ProgramID: programID, ClickID: clickID, At: at}
	if rules[fraud.ClickVelocity].Enabled {
		k.Window = time.Duration(rules[fraud.ClickVelocity].Seconds["window_seconds"]) * time.Second
	}
	return k
}

// factsOf are the conversion's facts the custom rule reads.
func factsOf(c Conversion) fraud.Conversion {
	return fraud.Conversion{ProgramID: c.ProgramID, AffiliateID: c.AffiliateID, Type: c.Type, Amount: c.Amount,
		Currency: c.Currency, OccurredAt: c.OccurredAt}
}

// DecideClicks decides the click-stage rules of conversions registered with a click: up to
// one batch of those waiting (click_pending), oldest first, with one read of ClickHouse for
// the batch. Registration never reads ClickHouse: a read per conversion cost more CPU than
// the rest of registering it (docs/fraud.md, Costs). Each conversion whose click ClickHouse
// has gets its click's country and device type and the rules' verdicts (a hold then puts
// the commission on hold, as AddVerdicts does); one waiting longer than MaxClickWait is given
// up. It returns how many it settled.
func (s *Service) DecideClicks(ctx context.Context) (int, error) {
	if s.clicks == nil {
		return 0, nil
	}
	type waiting struct {
		id, advertiserID, programID, clickID string
		clickedAt, createdAt                 time.Time
		rules                                fraud.Settings
		exempt                               []string
		facts                                fraud.Conversion
	}
	rows, err := s.db.Query(ctx, `SELECT v.id, v.advertiser_id, v.program_id, v.click_id, v.clicked_at, v.created_at,
		(SELECT rules FROM fraud_settings WHERE program_id = v.program_id),
		ARRAY(SELECT code FROM fraud_exemptions WHERE partnership_id = v.partnership_id),
		v.affiliate_id, v.type, v.amount, v.currency, v.occurred_at
		FROM conversions v WHERE v.click_pending ORDER BY v.created_at LIMIT $1`, clickBatch)
	if err != nil {
		return 0, fmt.Errorf("read conversions awaiting their click: %w", err)
	}
	var list []waiting
	var keys []fraud.ClickKey
	var w waiting
	var raw []byte
	f := &w.facts
	if _, err := pgx.ForEachRow(rows, []any{&w.id, &w.advertiserID, &w.programID, &w.clickID, &w.clickedAt, &w.createdAt, &raw,
		&w.exempt, &f.AffiliateID, &f.Type, &f.Amount, &f.Currency, &f.OccurredAt}, func() error {
		var err error
		if w.rules, err = fraud.ParseStored(raw); err != nil {
			return err
		}
		f.ProgramID, f.OccurredAt = w.programID, f.OccurredAt.UTC()
		list = append(list, w)
		keys = append(keys, keyOf(w.advertiserID, w.programID, w.clickID, w.clickedAt, w.rules))
		return nil
	}); err != nil {
		return 0, fmt.Errorf("read conversions awaiting their click: %w", err)
	}
	if len(list) == 0 {
		return 0, nil
	}
	readCtx, cancel := context.WithTimeout(ctx, clickReadTimeout)
	found, err := s.clicks.Clicks(readCtx, keys)
	cancel()
	if err != nil {
		return 0, err
	}
	// Most conversions fire no rule: they are settled in one statement; a conversion a rule
	// fires on is settled in a transaction of its own (its verdicts, maybe a hold and its event).
	var quiet, countries, devices []string
	settled := 0
	for _, w := range list {
		click, ok := found[w.clickID]
		switch {
		case !ok && s.now().Sub(w.createdAt) < MaxClickWait:
			continue
		case !ok:
			quiet, countries, devices = append(quiet, w.id), append(countries, ""), append(devices, "")
		case len(fraud.DecideClick(w.rules, w.exempt, click, w.facts, s.now())) == 0:
			quiet, countries, devices = append(quiet, w.id), append(countries, click.Country), append(devices, click.DeviceType)
		default:
			if err := s.settleClick(ctx, w.id, click, w.rules); err != nil {
				return settled, err
			}
		}
		settled++
	}
	if len(quiet) > 0 {
		if _, err := s.db.Exec(ctx, `UPDATE conversions v SET click_pending = false, click_country = NULLIF(u.country, ''),
			click_device_type = NULLIF(u.device, '') FROM unnest($1::text[], $2::text[], $3::text[]) u (id, country, device)
			WHERE v.id = u.id AND v.click_pending`, quiet, countries, devices); err != nil {
			return settled - len(quiet), fmt.Errorf("store the clicks of conversions: %w", err)
		}
	}
	return settled, nil
}

// settleClick records a waiting conversion's click and the click rules' verdicts, in one
// transaction, deciding again under the lock (the exemptions may have changed).
func (s *Service) settleClick(ctx context.Context, conversionID string, click fraud.Click, rules fraud.Settings) error {
	err := pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		locked, err := lock(ctx, tx, `v.id = $1 AND v.click_pending`, conversionID)
		if err != nil || len(locked) == 0 {
			return err // another replica settled it
		}
		c := locked[0]
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

// ClickRules runs DecideClicks every second until ctx ends, in every api replica: two that
// read the same conversion settle it once, under its row lock.
type ClickRules struct {
	Service *Service
	Log     *slog.Logger
}

// Run decides until ctx is done.
func (l ClickRules) Run(ctx context.Context) {
	run.Every(ctx, time.Second, l.Log, "decide the click rules", func(ctx context.Context) error {
		for {
			n, err := l.Service.DecideClicks(ctx)
			if err != nil || n < clickBatch {
				return err
			}
		}
	})
}
