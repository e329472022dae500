package conversions

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/partnerstream/partnerstream/internal/money"
	"github.com/partnerstream/partnerstream/internal/page"
)

// Rows reads a query's rows one at a time as Postgres sends them, for exports that must not
// hold a whole list in memory. Close it when done.
type Rows[T any] struct {
	rows pgx.Rows
	scan func(pgx.Row) (T, error)
	v    T
	err  error
}

// Next reads the next row; false at the end or on an error (see Err).
func (r *Rows[T]) Next() bool {
	if r.err != nil || !r.rows.Next() {
		return false
	}
	r.v, r.err = r.scan(r.rows)
	return r.err == nil
}

// Value is the row Next read.
func (r *Rows[T]) Value() T { return r.v }

// Err is the error that ended the rows, if any.
func (r *Rows[T]) Err() error {
	if r.err != nil {
		return r.err
	}
	return r.rows.Err()
}

// Close releases the connection.
func (r *Rows[T]) Close() { r.rows.Close() }

func query[T any](ctx context.Context, s *Service, what string, scan func(pgx.Row) (T, error), sql string, args ...any) (*Rows[T], error) {
	rows, err := s.db.Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("export %s: %w", what, err)
	}
	return &Rows[T]{rows: rows, scan: scan}, nil
}

// ConversionRows reads every conversion the viewer may see that f selects, newest first, as
// List orders them.
func (s *Service) ConversionRows(ctx context.Context, v Viewer, f Filter) (*Rows[Conversion], error) {
	where, args := f.where("v", v, page.Request{})
	return query(ctx, s, "conversions", scanConversion, `SELECT `+conversionColumns+` FROM conversions v
		JOIN commissions c ON c.conversion_id = v.id WHERE `+where, args...)
}

// CommissionRows reads every commission the viewer may see that f selects, newest first,
// with its two companies' names.
func (s *Service) CommissionRows(ctx context.Context, v Viewer, f Filter) (*Rows[Commission], error) {
	where, args := f.where("c", v, page.Request{})
	return query(ctx, s, "commissions", scanNamedCommission, `SELECT `+commissionColumns+`,
		(SELECT name FROM companies WHERE id = c.advertiser_id), (SELECT name FROM companies WHERE id = c.affiliate_id)
		FROM commissions c WHERE `+where, args...)
}

func scanNamedCommission(r pgx.Row) (Commission, error) {
	var m Commission
	err := r.Scan(append(m.targets(), &m.AdvertiserName, &m.AffiliateName)...)
	m.utc()
	return m, err
}

// PayoutTotal is what one advertiser owes (or paid) one affiliate in one currency: the sum
// of their payouts that a PayoutFilter selects. The payee is the affiliate: its company name
// and its first owner's email.
type PayoutTotal struct {
	AdvertiserID string
	AffiliateID  string
	// AdvertiserName is the brand's company name.
	AdvertiserName string
	PayeeName      string
	PayeeEmail     string
	Currency       string
	Amount         money.Sum // minor units of Currency
	Payouts        int64
	Commissions    int64
	// PeriodStart and PeriodEnd span the payouts' periods.
	PeriodStart, PeriodEnd time.Time
	// PayoutIDs lists the payouts, newest first; the first is the row's reference.
	PayoutIDs []string
}

// PayoutTotals reads, per advertiser, affiliate and currency, the total of the payouts the
// viewer may see that f selects, ordered by payee name: one row per payment to make.
func (s *Service) PayoutTotals(ctx context.Context, v Viewer, f PayoutFilter) (*Rows[PayoutTotal], error) {
	return query(ctx, s, "payout totals", scanPayoutTotal, `SELECT p.advertiser_id, p.affiliate_id, co.name,
			COALESCE((SELECT NULLIF(f.payout_email, '') FROM partner_profiles f WHERE f.company_id = p.affiliate_id),
				(SELECT u.email FROM users u WHERE u.company_id = p.affiliate_id AND u.role = 'owner'
				ORDER BY u.created_at, u.id LIMIT 1), ''),
			p.currency, sum(p.amount)::text, count(*), sum(p.commission_count), min(p.period_start), max(p.period_end),
			array_agg(p.id ORDER BY p.id DESC), (SELECT a.name FROM companies a WHERE a.id = p.advertiser_id)
		FROM payouts p JOIN companies co ON co.id = p.affiliate_id
		WHERE p.`+v.column()+` = $1 AND ($2 = '' OR p.status = $2) AND ($3 = '' OR p.affiliate_id = $3)
		GROUP BY p.advertiser_id, p.affiliate_id, co.name, p.currency
		ORDER BY co.name, p.affiliate_id, p.advertiser_id, p.currency`, v.CompanyID, f.Status, f.AffiliateID)
}

func scanPayoutTotal(row pgx.Row) (PayoutTotal, error) {
	var t PayoutTotal
	var amount string
	if err := row.Scan(&t.AdvertiserID, &t.AffiliateID, &t.PayeeName, &t.PayeeEmail, &t.Currency, &amount, &t.Payouts,
		&t.Commissions, &t.PeriodStart, &t.PeriodEnd, &t.PayoutIDs, &t.AdvertiserName); err != nil {
		return PayoutTotal{}, err
	}
	var err error
	if t.Amount, err = money.ParseSum(amount); err != nil {
		return PayoutTotal{}, fmt.Errorf("payout total of %s: %w", t.AffiliateID, err)
	}
	t.PeriodStart, t.PeriodEnd = t.PeriodStart.UTC(), t.PeriodEnd.UTC()
	return t, nil
}

// Names are the names of the programs and companies in a viewer's figures, which the
// statistics file (read from ClickHouse, which keeps ids only) writes beside their ids.
type Names struct {
	Programs  map[string]string
	Companies map[string]string
}

// Names reads the names of what the viewer's figures can name: its own company, the
// programs it has a partnership in (an advertiser: its programs) and the companies on the
// other side of its partnerships. They are held in memory for the length of one export: one
// entry per program and partner.
func (s *Service) Names(ctx context.Context, v Viewer) (Names, error) {
	n := Names{Programs: map[string]string{}, Companies: map[string]string{}}
	other := "advertiser_id"
	if !v.Affiliate {
		other = "affiliate_id"
	}
	read := func(into map[string]string, sql string) error {
		rows, _ := s.db.Query(ctx, sql, v.CompanyID)
		var id, name string
		_, err := pgx.ForEachRow(rows, []any{&id, &name}, func() error { into[id] = name; return nil })
		return err
	}
	programs := `SELECT p.id, p.name FROM programs p WHERE p.advertiser_id = $1`
	if v.Affiliate {
		programs = `SELECT p.id, p.name FROM partnerships s JOIN programs p ON p.id = s.program_id WHERE s.affiliate_id = $1`
	}
	if err := read(n.Programs, programs); err != nil {
		return Names{}, fmt.Errorf("read the program names: %w", err)
	}
	if err := read(n.Companies, `SELECT id, name FROM companies WHERE id = $1
		UNION SELECT co.id, co.name FROM partnerships s JOIN companies co ON co.id = s.`+other+` WHERE s.`+v.column()+` = $1`); err != nil {
		return Names{}, fmt.Errorf("read the company names: %w", err)
	}
	return n, nil
}
