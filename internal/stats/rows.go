package stats

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/partnerstream/partnerstream/internal/money"
)

// Rows reads an export's rows one at a time as ClickHouse sends them (see Service.Rows).
// Close it when done.
type Rows struct {
	rows driver.Rows
	g    grouping
	p    Params
	// Grouped by day: the day last returned, and the row read ahead of the days before it.
	last  time.Time
	ahead *Row
	// From the quarter-hour rollups: every row, made before the first is read (one per day
	// or hour and currency, so at most a few thousand).
	made []Row
	v    Row
	err  error
}

// Rows reads the figures of p's groups for an export, one row per group and currency of its
// conversions, in one query whose result ClickHouse streams. A group's clicks (which have no
// currency) repeat on each of its currency rows; a group without conversions has one row
// without currency (or in p.Currency when asked). Every day (or hour) of the range has a row
// when grouped by day (or hour), in time order; the other groupings run by clicks, then
// commission, descending, as Query orders them.
func (s *Service) Rows(ctx context.Context, scope Scope, p Params) (*Rows, error) {
	pl, err := s.plan(scope, p)
	if err != nil {
		return nil, err
	}
	p, g := pl.p, pl.g
	if pl.quarters {
		return s.bucketRows(ctx, pl)
	}
	earning := "status IN ('" + strings.Join(earningStatuses, "', '") + "')"
	order := "clicks DESC, commission_sum DESC, k, p, a, currency"
	if p.GroupBy == Day {
		order = "k, currency"
	}
	// Each side sums its rollup by group; the FULL JOIN (ClickHouse 18.16 fills the side a
	// group lacks with defaults) keeps groups with only clicks or only conversions. Amounts
	// are Decimal(38, 0), read as text as in Query.
	// A grouping without clicks (attribution) reads its groups, with none, from its conversions.
	clicks, clickArgs := "sum(clicks) AS clicks, sum(unique_clicks) AS uniques FROM "+pl.clicks.from, pl.clicks.args
	if g.clicksTable == "" {
		clicks, clickArgs = "toUInt64(0) AS clicks, toUInt64(0) AS uniques FROM "+pl.convsAll.from, pl.convsAll.args
	}
	q := "SELECT k, p, a, clicks, uniques, currency, pending, approved, rejected, paid, reversed, total, sale_text, commission_text FROM (" +
		"SELECT " + g.key + " AS k, " + aliased(g.extra) + ", " + clicks + " GROUP BY " + g.column +
		") ALL FULL OUTER JOIN (" +
		"SELECT " + g.key + " AS k, " + aliased(g.extra) + ", currency, " +
		"sumIf(conversions, status = 'pending') AS pending, sumIf(conversions, status = 'approved') AS approved, " +
		"sumIf(conversions, status = 'rejected') AS rejected, sumIf(conversions, status = 'paid') AS paid, " +
		"sumIf(conversions, status = 'reversed') AS reversed, sum(conversions) AS total, " +
		"sumIf(sale_amount, " + earning + ") AS sale_sum, " +
		"sumIf(commission, " + earning + ") AS commission_sum, " +
		"toString(sale_sum) AS sale_text, toString(commission_sum) AS commission_text FROM " +
		pl.convs.from + " GROUP BY " + g.column + ", currency " +
		"HAVING total != 0 OR sale_sum != 0 OR commission_sum != 0" +
		") USING (k, p, a) ORDER BY " + order
	rows, err := s.conn.Query(ctx, q, append(slices.Clip(clickArgs), pl.convs.args...)...)
	if err != nil {
		return nil, fmt.Errorf("stats: export: %w", err)
	}
	return &Rows{rows: rows, g: g, p: p, last: p.From.AddDate(0, 0, -1)}, nil
}

// bucketRows makes the export's rows of a plan read from the quarter-hour rollups: each day
// or hour has a row per currency of its conversions, or one without any.
func (s *Service) bucketRows(ctx context.Context, pl plan) (*Rows, error) {
	clicks, convs, err := s.figures(ctx, pl)
	if err != nil {
		return nil, fmt.Errorf("stats: export: %w", err)
	}
	type cell struct{ key, currency string }
	byCurrency := map[cell]*Row{}
	currencies := map[string][]string{}
	for _, c := range convs {
		if c.zero() {
			continue
		}
		k := cell{c.key, c.currency}
		r := byCurrency[k]
		if r == nil {
			r = &Row{Currency: c.currency}
			byCurrency[k] = r
			currencies[c.key] = append(currencies[c.key], c.currency)
		}
		a := Amount{SaleAmount: r.SaleAmount, Commission: r.Commission}
		c.addTo(r, &a)
		r.SaleAmount, r.Commission = a.SaleAmount, a.Commission
	}
	clicksOf := map[string]clickFigures{}
	for _, c := range clicks {
		clicksOf[c.key] = c
	}
	out := &Rows{g: pl.g, p: pl.p}
	for _, b := range pl.p.buckets() {
		cs := currencies[b.key]
		slices.Sort(cs)
		if len(cs) == 0 {
			cs = []string{pl.p.Currency}
		}
		for _, cur := range cs {
			r := Row{Currency: cur}
			if v := byCurrency[cell{b.key, cur}]; v != nil {
				r = *v
			}
			pl.g.set(&r, b.key, "", "")
			r.Clicks, r.UniqueClicks = clicksOf[b.key].clicks, clicksOf[b.key].unique
			out.made = append(out.made, r)
		}
	}
	return out, nil
}

// aliased names a grouping's extra columns p and a.
func aliased(extra string) string {
	if extra == noExtra {
		return "'' AS p, '' AS a"
	}
	return "any(program_id) AS p, any(affiliate_id) AS a"
}

// Next reads the next row; false at the end or on an error (see Err).
func (r *Rows) Next() bool {
	if r.err != nil {
		return false
	}
	if r.rows == nil {
		if len(r.made) == 0 {
			return false
		}
		r.v, r.made = r.made[0], r.made[1:]
		return true
	}
	if r.p.GroupBy != Day {
		if !r.rows.Next() {
			return false
		}
		r.v, r.err = r.scan()
		return r.err == nil
	}
	for r.ahead == nil && r.rows.Next() {
		v, err := r.scan()
		if r.err = err; err != nil {
			return false
		}
		if !v.Day.Before(r.p.From) && !v.Day.After(r.p.To) { // see Query: only the range's own days
			r.ahead = &v
		}
	}
	next := r.last.AddDate(0, 0, 1)
	switch {
	case r.ahead != nil && !r.ahead.Day.After(next):
		// Another currency of the last day, or the next day's first.
		r.v, r.ahead, r.last = *r.ahead, nil, r.ahead.Day
	case !next.After(r.p.To):
		r.v, r.last = Row{Day: next, Currency: r.p.Currency}, next // a day without figures
	default:
		return false
	}
	return true
}

func (r *Rows) scan() (Row, error) {
	var v Row
	var key, program, affiliate, sale, commission string
	var clicks, unique uint64
	c := &v.Conversions
	if err := r.rows.Scan(&key, &program, &affiliate, &clicks, &unique, &v.Currency, &c.Pending, &c.Approved, &c.Rejected,
		&c.Paid, &c.Reversed, &c.Total, &sale, &commission); err != nil {
		return Row{}, fmt.Errorf("stats: export: read: %w", err)
	}
	r.g.set(&v, key, program, affiliate)
	v.Clicks, v.UniqueClicks = int64(clicks), int64(unique)
	if v.Currency == "" {
		v.Currency = r.p.Currency
	}
	for _, a := range []struct {
		text string
		into *money.Sum
	}{{sale, &v.SaleAmount}, {commission, &v.Commission}} {
		if a.text == "" {
			continue // a group without conversions
		}
		var err error
		if *a.into, err = money.ParseSum(a.text); err != nil {
			return Row{}, fmt.Errorf("stats: export: read amount %q: %w", a.text, err)
		}
	}
	return v, nil
}

// Value is the row Next read.
func (r *Rows) Value() Row { return r.v }

// Err is the error that ended the rows, if any.
func (r *Rows) Err() error {
	if r.err != nil {
		return r.err
	}
	if r.rows == nil {
		return nil
	}
	return r.rows.Err()
}

// Close ends the query.
func (r *Rows) Close() {
	if r.rows != nil {
		_ = r.rows.Close()
	}
}
