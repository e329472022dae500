package ingest

import (
	"context"
	"fmt"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/partnerstream/partnerstream/internal/events"
)

// storedConversion is what a conversion's figures currently count, from the conversions
// table.
type storedConversion struct {
	Conversion
	found bool
}

const conversionColumns = `conversion_id, version, revision, status, type, currency, amount, commission, occurred_at,
	advertiser_id, program_id, affiliate_id, link_id, click_id, sub1, commission_id, external_id, attribution, ` + events.ClickOriginColumns

// WriteConversions applies each conversion's newest state in convs that is newer than the
// stored one: it retracts what the stored state counted (a sign -1 row) and adds the new
// state (sign +1), in one insert. Anything not newer is a duplicate and writes nothing.
func (w *Writer) WriteConversions(ctx context.Context, convs []Conversion) (WriteResult, error) {
	p, err := w.planConversions(ctx, convs, nil)
	return write(ctx, p, err)
}

type conversionPlan struct {
	w       *Writer
	rows    []conversionRow
	written map[string]Conversion // conversion id -> the state this plan stores
	// awaiting are written conversions whose click is not stored yet, arrived the arrivals
	// of clicks this plan handled: rows of conversions_awaiting_click, done 0 and 1.
	awaiting, arrived []Conversion
	res               WriteResult
}

// conversionRow is a state counted (sign +1) or retracted (-1) because of the event of cause.
type conversionRow struct {
	state, cause Conversion
	sign         int8
}

func (p *conversionPlan) result() WriteResult { return p.res }

// apply lists the awaiting conversions before it writes them: a crash between the two
// inserts leaves the batch to be written again, while a conversion stored but not listed would
// never be moved, its events being duplicates from then on.
func (p *conversionPlan) apply(ctx context.Context) error {
	if err := p.w.listAwaiting(ctx, p.awaiting, p.arrived); err != nil {
		return err
	}
	if len(p.rows) == 0 {
		return nil
	}
	batch, err := p.w.conn.PrepareBatch(ctx, "INSERT INTO "+p.w.db+".conversion_changes ("+conversionColumns+
		", sign, event_id, kafka_partition, kafka_offset, ingested_at)")
	if err != nil {
		return fmt.Errorf("ingest: prepare conversions insert: %w", err)
	}
	defer func() { _ = batch.Close() }()
	now := p.w.now().UTC()
	for _, r := range p.rows {
		if err := appendConversion(batch, r.state, r.sign, r.cause, now); err != nil {
			return err
		}
	}
	if err := batch.Send(); err != nil {
		return fmt.Errorf("ingest: insert %d conversion changes: %w", p.res.Written, err)
	}
	return nil
}

// planConversions reads the stored state of each conversion; a state prev stores counts as
// the stored one. Each conversion's newest state in convs replaces the stored one when newer,
// and the arrival of its click moves what it then has to the click's sub1.
func (w *Writer) planConversions(ctx context.Context, convs []Conversion, prev plan) (plan, error) {
	p := &conversionPlan{w: w, written: map[string]Conversion{}}
	newest := make(map[string]int, len(convs)) // conversion id -> index in convs of its newest state
	arrivals := map[string]int{}               // conversion id -> index in convs of its click's arrival
	var ids []string
	for i, c := range convs {
		_, hasState := newest[c.ID]
		_, hasArrival := arrivals[c.ID]
		if !hasState && !hasArrival {
			ids = append(ids, c.ID)
		}
		switch {
		case c.ClickArrived:
			if hasArrival {
				p.res.Duplicates++
			}
			arrivals[c.ID] = i
		case !hasState:
			newest[c.ID] = i
		case c.Version > convs[newest[c.ID]].Version:
			newest[c.ID] = i
			p.res.Duplicates++
		default:
			p.res.Duplicates++
		}
	}
	stored, err := w.storedConversions(ctx, ids)
	if err != nil {
		return nil, err
	}
	if prev, ok := prev.(*conversionPlan); ok {
		for _, id := range ids {
			if c, ok := prev.written[id]; ok && (!stored[id].found || c.newerThan(stored[id].Conversion)) {
				stored[id] = storedConversion{Conversion: c, found: true}
			}
		}
	}
	var awaiting map[string]bool
	if p.res.WithoutClick, awaiting, err = w.attribute(ctx, convs, newest, stored); err != nil {
		return nil, err
	}
	for _, id := range ids {
		s := stored[id]
		to, cause, changed := s.Conversion, Conversion{}, false
		if i, ok := newest[id]; ok {
			if c := convs[i]; !s.found || c.newerThan(s.Conversion) {
				to, cause, changed = c, c, true
			} else {
				p.res.Duplicates++
			}
		}
		if i, ok := arrivals[id]; ok {
			a := convs[i]
			p.arrived = append(p.arrived, a)
			if (s.found || changed) && moveToClick(&to, a) {
				if !changed {
					to.Revision++
					cause, changed = a, true
				}
				p.res.Moved++
			} else {
				p.res.Duplicates++
			}
		}
		if !changed {
			continue
		}
		if s.found {
			// The retraction carries the event that caused it, for audits.
			p.rows = append(p.rows, conversionRow{state: s.Conversion, cause: cause, sign: -1})
		}
		p.rows = append(p.rows, conversionRow{state: to, cause: cause, sign: 1})
		p.written[id] = to
		p.res.Written++
		if awaiting[id] {
			p.awaiting = append(p.awaiting, to)
		}
	}
	return p, nil
}

func appendConversion(batch driver.Batch, c Conversion, sign int8, cause Conversion, now time.Time) error {
	v := append([]any{c.ID, c.Version, c.Revision, c.Status, c.Type, c.Currency, c.Amount, c.Commission, c.OccurredAt.UTC(),
		c.AdvertiserID, c.ProgramID, c.AffiliateID, c.LinkID, c.ClickID, c.Sub1, c.CommissionID, c.ExternalID, c.Attribution},
		c.Origin.Values()...)
	err := batch.Append(append(v, sign, cause.EventID, cause.Partition, cause.Offset, now)...)
	if err != nil {
		return fmt.Errorf("ingest: append conversion %s: %w", c.ID, err)
	}
	return nil
}

// storedConversions reads the newest stored state of each conversion. It takes the highest
// version and revision itself rather than relying on FINAL, because the engine collapses
// versions only when it merges.
func (w *Writer) storedConversions(ctx context.Context, ids []string) (map[string]storedConversion, error) {
	stored := make(map[string]storedConversion, len(ids))
	err := w.lookup(ctx, "SELECT "+conversionColumns+" FROM "+w.db+".conversions WHERE conversion_id IN _ids", ids, func(rows driver.Rows) error {
		var c Conversion
		if err := rows.Scan(append([]any{&c.ID, &c.Version, &c.Revision, &c.Status, &c.Type, &c.Currency, &c.Amount, &c.Commission, &c.OccurredAt,
			&c.AdvertiserID, &c.ProgramID, &c.AffiliateID, &c.LinkID, &c.ClickID, &c.Sub1, &c.CommissionID, &c.ExternalID, &c.Attribution},
			c.Origin.Fields()...)...); err != nil {
			return err
		}
		if s, ok := stored[c.ID]; !ok || c.newerThan(s.Conversion) {
			stored[c.ID] = storedConversion{Conversion: c, found: true}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("ingest: look up stored conversions: %w", err)
	}
	return stored, nil
}
