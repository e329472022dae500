package ingest

import (
	"context"
	"fmt"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// storedConversion is what a conversion's figures currently count, from the conversions
// table.
type storedConversion struct {
	Conversion
	found bool
}

const conversionColumns = `conversion_id, version, status, type, currency, amount, commission, occurred_at,
	advertiser_id, program_id, affiliate_id, link_id, click_id, sub1, commission_id, external_id, attribution`

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
	res     WriteResult
}

// conversionRow is a state counted (sign +1) or retracted (-1) because of the event of cause.
type conversionRow struct {
	state, cause Conversion
	sign         int8
}

func (p *conversionPlan) result() WriteResult { return p.res }

func (p *conversionPlan) apply(ctx context.Context) error {
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
// the stored one.
func (w *Writer) planConversions(ctx context.Context, convs []Conversion, prev plan) (plan, error) {
	p := &conversionPlan{w: w, written: map[string]Conversion{}}
	newest := make(map[string]int, len(convs)) // conversion id -> index in convs
	var ids []string
	for i, c := range convs {
		j, ok := newest[c.ID]
		switch {
		case !ok:
			newest[c.ID] = i
			ids = append(ids, c.ID)
		case c.Version > convs[j].Version:
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
		for id, c := range prev.written {
			if _, ok := newest[id]; ok && (!stored[id].found || c.Version > stored[id].Version) {
				stored[id] = storedConversion{Conversion: c, found: true}
			}
		}
	}
	if p.res.WithoutClick, err = w.attribute(ctx, convs, newest, stored); err != nil {
		return nil, err
	}
	for _, id := range ids {
		c := convs[newest[id]]
		s := stored[id]
		if s.found && c.Version <= s.Version {
			p.res.Duplicates++
			continue
		}
		if s.found {
			// The retraction carries the event that caused it, for audits.
			p.rows = append(p.rows, conversionRow{state: s.Conversion, cause: c, sign: -1})
		}
		p.rows = append(p.rows, conversionRow{state: c, cause: c, sign: 1})
		p.written[id] = c
		p.res.Written++
	}
	return p, nil
}

func appendConversion(batch driver.Batch, c Conversion, sign int8, cause Conversion, now time.Time) error {
	err := batch.Append(c.ID, c.Version, c.Status, c.Type, c.Currency, c.Amount, c.Commission, c.OccurredAt.UTC(),
		c.AdvertiserID, c.ProgramID, c.AffiliateID, c.LinkID, c.ClickID, c.Sub1, c.CommissionID, c.ExternalID, c.Attribution,
		sign, cause.EventID, cause.Partition, cause.Offset, now)
	if err != nil {
		return fmt.Errorf("ingest: append conversion %s: %w", c.ID, err)
	}
	return nil
}

// storedConversions reads the newest stored state of each conversion. It takes the highest
// version itself rather than relying on FINAL, because the engine collapses versions only
// when it merges.
func (w *Writer) storedConversions(ctx context.Context, ids []string) (map[string]storedConversion, error) {
	stored := make(map[string]storedConversion, len(ids))
	err := w.lookup(ctx, "SELECT "+conversionColumns+" FROM "+w.db+".conversions WHERE conversion_id IN _ids", ids, func(rows driver.Rows) error {
		var c Conversion
		if err := rows.Scan(&c.ID, &c.Version, &c.Status, &c.Type, &c.Currency, &c.Amount, &c.Commission, &c.OccurredAt,
			&c.AdvertiserID, &c.ProgramID, &c.AffiliateID, &c.LinkID, &c.ClickID, &c.Sub1, &c.CommissionID, &c.ExternalID, &c.Attribution); err != nil {
			return err
		}
		if s, ok := stored[c.ID]; !ok || c.Version > s.Version {
			stored[c.ID] = storedConversion{Conversion: c, found: true}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("ingest: look up stored conversions: %w", err)
	}
	return stored, nil
}
