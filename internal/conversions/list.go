package conversions

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/partnerstream/partnerstream/internal/page"
)

// Filter narrows a list of conversions or commissions. Zero fields do not filter.
type Filter struct {
	Status      string // commission status
	ProgramID   string
	AffiliateID string
	PayoutID    string
	// From and To bound the conversion's occurred_at: From <= t < To.
	From, To time.Time
	// Risk narrows to the commissions fraud rules fired on (the review queue): RiskAny,
	// RiskHeld or RiskFlagged; empty does not filter.
	Risk string
	// ReasonCode narrows to the commissions a rule of that code fired on (shadow included).
	ReasonCode string
}

// Values of Filter.Risk.
const (
	// RiskAny: held, or any rule fired (shadow rules included).
	RiskAny = "any"
	// RiskHeld: on hold now.
	RiskHeld = "held"
	// RiskFlagged: a rule fired and the commission is not on hold.
	RiskFlagged = "flagged"
)

// Risks lists the values of Filter.Risk.
var Risks = []string{RiskAny, RiskHeld, RiskFlagged}

// where builds the scoped, filtered, paginated condition on table alias a (conversions or
// commissions: both carry the filtered columns) ordered by a.id; a zero page is every row.
func (f Filter) where(a string, v Viewer, p page.Request) (string, []any) {
	conds := []string{a + "." + v.column() + " = $1"}
	args := []any{v.CompanyID}
	add := func(cond string, val any) {
		args = append(args, val)
		conds = append(conds, fmt.Sprintf(cond, len(args)))
	}
	if f.Status != "" {
		add("c.status = $%d", f.Status)
	}
	if f.ProgramID != "" {
		add(a+".program_id = $%d", f.ProgramID)
	}
	if f.AffiliateID != "" {
		add(a+".affiliate_id = $%d", f.AffiliateID)
	}
	if f.PayoutID != "" {
		add("c.payout_id = $%d", f.PayoutID)
	}
	const fired = "EXISTS (SELECT 1 FROM fraud_verdicts r WHERE r.commission_id = c.id)"
	switch f.Risk {
	case RiskAny:
		conds = append(conds, "(c.held_at IS NOT NULL OR "+fired+")")
	case RiskHeld:
		conds = append(conds, "c.held_at IS NOT NULL")
	case RiskFlagged:
		conds = append(conds, "c.held_at IS NULL AND "+fired)
	}
	if f.ReasonCode != "" {
		add("EXISTS (SELECT 1 FROM fraud_verdicts r WHERE r.commission_id = c.id AND r.code = $%d)", f.ReasonCode)
	}
	if !f.From.IsZero() {
		add(a+".occurred_at >= $%d", f.From)
	}
	if !f.To.IsZero() {
		add(a+".occurred_at < $%d", f.To)
	}
	if p.Before != "" {
		add(a+".id < $%d", p.Before)
	}
	where := strings.Join(conds, " AND ") + " ORDER BY " + a + ".id DESC"
	if p.Limit == 0 {
		return where, args // every row: an export
	}
	args = append(args, p.Limit+1)
	return where + fmt.Sprintf(" LIMIT $%d", len(args)), args
}

// List returns a page of the conversions the viewer may see, newest first.
func (s *Service) List(ctx context.Context, v Viewer, f Filter, p page.Request) ([]Conversion, string, error) {
	where, args := f.where("v", v, p)
	rows, err := s.db.Query(ctx, `SELECT `+conversionColumns+` FROM conversions v
		JOIN commissions c ON c.conversion_id = v.id WHERE `+where, args...)
	if err != nil {
		return nil, "", fmt.Errorf("list conversions: %w", err)
	}
	list, err := collect(rows, scanConversion)
	if err != nil {
		return nil, "", fmt.Errorf("list conversions: %w", err)
	}
	list, next := page.Cut(list, p.Limit, func(c Conversion) string { return c.ID })
	return list, next, nil
}

// Commissions returns a page of the commissions the viewer may see, newest first.
func (s *Service) Commissions(ctx context.Context, v Viewer, f Filter, p page.Request) ([]Commission, string, error) {
	where, args := f.where("c", v, p)
	rows, err := s.db.Query(ctx, `SELECT `+commissionColumns+` FROM commissions c WHERE `+where, args...)
	if err != nil {
		return nil, "", fmt.Errorf("list commissions: %w", err)
	}
	list, err := collect(rows, scanCommission)
	if err != nil {
		return nil, "", fmt.Errorf("list commissions: %w", err)
	}
	list, next := page.Cut(list, p.Limit, func(m Commission) string { return m.ID })
	return list, next, nil
}

func scanCommission(r pgx.Row) (Commission, error) {
	var m Commission
	err := r.Scan(m.targets()...)
	m.utc()
	return m, err
}

func collect[T any](rows pgx.Rows, scan func(pgx.Row) (T, error)) ([]T, error) {
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}
