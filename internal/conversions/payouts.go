package conversions

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/partnerstream/partnerstream/internal/ids"
	"github.com/partnerstream/partnerstream/internal/money"
	"github.com/partnerstream/partnerstream/internal/page"
)

// Payout statuses.
const (
	PayoutPending  = "pending"
	PayoutPaid     = "paid"
	PayoutFailed   = "failed"
	PayoutCanceled = "canceled"
)

// PayoutStatuses lists the payout statuses.
var PayoutStatuses = []string{PayoutPending, PayoutPaid, PayoutFailed, PayoutCanceled}

var payoutTransitions = map[string][]string{
	PayoutPending:  {PayoutPaid, PayoutFailed, PayoutCanceled},
	PayoutPaid:     {},
	PayoutFailed:   {},
	PayoutCanceled: {},
}

// ErrNoCommissions: a payout would gather nothing.
var ErrNoCommissions = errors.New("no approved commission is waiting for a payout in that period")

// Payout gathers an affiliate's approved commissions of one advertiser, in one currency,
// whose conversions occurred in [PeriodStart, PeriodEnd).
type Payout struct {
	ID           string
	AdvertiserID string
	AffiliateID  string
	// The companies' names: each side of a payout may see the other's.
	AdvertiserName, AffiliateName string
	Currency                      string
	PeriodStart                   time.Time
	PeriodEnd                     time.Time
	Amount                        int64 // the exact sum of the commissions, minor units of Currency
	CommissionCount               int
	Status                        string
	CreatedAt                     time.Time
	UpdatedAt                     time.Time
}

// NewPayout is a request to gather commissions into a payout.
type NewPayout struct {
	AffiliateID string
	Currency    string
	PeriodStart time.Time
	PeriodEnd   time.Time
}

// PayoutFilter narrows a list of payouts. Zero fields do not filter.
type PayoutFilter struct {
	Status      string
	AffiliateID string
}

// CreatePayout gathers the affiliate's approved commissions that are in no payout yet, in the
// currency, whose conversions occurred in the period. Each commission lands in one payout
// only, even when two are created at once.
func (s *Service) CreatePayout(ctx context.Context, advertiserID string, in NewPayout) (Payout, error) {
	switch {
	case !ids.Valid(ids.Company, in.AffiliateID):
		return Payout{}, invalid("affiliate_id", "must be a company id (co_...)")
	case !money.ValidCurrency(in.Currency):
		return Payout{}, invalid("currency", "must be an ISO 4217 code in upper case")
	case in.PeriodStart.IsZero() || in.PeriodEnd.IsZero() || !in.PeriodEnd.After(in.PeriodStart):
		return Payout{}, invalid("period_end", "must be after period_start")
	}
	now := s.now()
	p := Payout{ID: ids.New(ids.Payout), AdvertiserID: advertiserID, AffiliateID: in.AffiliateID, Currency: in.Currency,
		PeriodStart: in.PeriodStart.UTC(), PeriodEnd: in.PeriodEnd.UTC(), Status: PayoutPending, CreatedAt: now, UpdatedAt: now}
	err := pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		// FOR UPDATE makes a concurrent creation wait, then re-check payout_id IS NULL. A
		// commission a fraud rule holds is skipped until its release.
		rows, err := tx.Query(ctx, `SELECT id, amount FROM commissions
			WHERE advertiser_id = $1 AND affiliate_id = $2 AND currency = $3 AND status = 'approved'
			  AND payout_id IS NULL AND held_at IS NULL AND occurred_at >= $4 AND occurred_at < $5
			ORDER BY id FOR UPDATE`, advertiserID, in.AffiliateID, in.Currency, p.PeriodStart, p.PeriodEnd)
		if err != nil {
			return fmt.Errorf("read payable commissions: %w", err)
		}
		var gathered []string
		_, err = collect(rows, func(r pgx.Row) (struct{}, error) {
			var id string
			var amount int64
			if err := r.Scan(&id, &amount); err != nil {
				return struct{}{}, err
			}
			if amount > math.MaxInt64-p.Amount {
				return struct{}{}, invalid("period_end", "the commissions of this period add up to more than a payout can hold: choose a shorter period")
			}
			p.Amount += amount
			gathered = append(gathered, id)
			return struct{}{}, nil
		})
		if err != nil {
			return err
		}
		if len(gathered) == 0 {
			return ErrNoCommissions
		}
		p.CommissionCount = len(gathered)
		if err := tx.QueryRow(ctx, `INSERT INTO payouts (id, advertiser_id, affiliate_id, currency, period_start,
			period_end, amount, commission_count, status, created_at, updated_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $10) RETURNING `+payoutNames, p.ID, p.AdvertiserID, p.AffiliateID, p.Currency,
			p.PeriodStart, p.PeriodEnd, p.Amount, p.CommissionCount, p.Status, now).Scan(&p.AdvertiserName, &p.AffiliateName); err != nil {
			return fmt.Errorf("insert payout: %w", err)
		}
		if _, err := tx.Exec(ctx, `UPDATE commissions SET payout_id = $1, updated_at = $2 WHERE id = ANY($3)`,
			p.ID, now, gathered); err != nil {
			return fmt.Errorf("gather commissions: %w", err)
		}
		return nil
	})
	if err != nil {
		return Payout{}, fmt.Errorf("create payout: %w", err)
	}
	return p, nil
}

// SettlePayout moves a pending payout of the advertiser to paid, failed or canceled. Paid
// marks its commissions paid (with their events); failed and canceled release them, approved,
// for a later payout.
func (s *Service) SettlePayout(ctx context.Context, advertiserID, payoutID, to string) (Payout, error) {
	var p Payout
	err := pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		var err error
		p, err = scanPayout(tx.QueryRow(ctx, `SELECT `+payoutColumns+` FROM payouts WHERE id = $1 AND advertiser_id = $2 FOR UPDATE`,
			payoutID, advertiserID))
		if err != nil {
			return err
		}
		if !slices.Contains(payoutTransitions[p.Status], to) {
			return &TransitionError{ID: p.ID, From: p.Status, To: to, Allowed: slices.Clone(payoutTransitions[p.Status])}
		}
		now := s.now()
		if to == PayoutPaid {
			gathered, err := lock(ctx, tx, `c.payout_id = $1`, p.ID)
			if err != nil {
				return err
			}
			for i := range gathered {
				if err := move(ctx, tx, &gathered[i], Paid, "", now); err != nil {
					return err
				}
			}
		} else if _, err := tx.Exec(ctx, `UPDATE commissions SET payout_id = NULL, updated_at = $2 WHERE payout_id = $1`, p.ID, now); err != nil {
			return fmt.Errorf("release commissions: %w", err)
		}
		if _, err := tx.Exec(ctx, `UPDATE payouts SET status = $2, updated_at = $3 WHERE id = $1`, p.ID, to, now); err != nil {
			return fmt.Errorf("update payout: %w", err)
		}
		p.Status, p.UpdatedAt = to, now
		return nil
	})
	if err != nil {
		return Payout{}, fmt.Errorf("mark payout %s %s: %w", payoutID, to, err)
	}
	return p, nil
}

// Payout returns one payout the viewer may see.
func (s *Service) Payout(ctx context.Context, v Viewer, id string) (Payout, error) {
	p, err := scanPayout(s.db.QueryRow(ctx, `SELECT `+payoutColumns+` FROM payouts WHERE id = $1 AND `+v.column()+` = $2`, id, v.CompanyID))
	if err != nil {
		return Payout{}, fmt.Errorf("read payout %s: %w", id, err)
	}
	return p, nil
}

// Payouts returns a page of the payouts the viewer may see, newest first.
func (s *Service) Payouts(ctx context.Context, v Viewer, f PayoutFilter, p page.Request) ([]Payout, string, error) {
	rows, err := s.db.Query(ctx, `SELECT `+payoutColumns+` FROM payouts WHERE `+v.column()+` = $1
		AND ($2 = '' OR status = $2) AND ($3 = '' OR affiliate_id = $3) AND ($4 = '' OR id < $4)
		ORDER BY id DESC LIMIT $5`, v.CompanyID, f.Status, f.AffiliateID, p.Before, p.Limit+1)
	if err != nil {
		return nil, "", fmt.Errorf("list payouts: %w", err)
	}
	list, err := collect(rows, scanPayout)
	if err != nil {
		return nil, "", fmt.Errorf("list payouts: %w", err)
	}
	list, next := page.Cut(list, p.Limit, func(p Payout) string { return p.ID })
	return list, next, nil
}

const payoutColumns = `id, advertiser_id, affiliate_id, currency, period_start, period_end, amount, commission_count,
	status, created_at, updated_at, ` + payoutNames

// payoutNames are the names of a payouts row's two companies.
const payoutNames = `(SELECT name FROM companies WHERE id = advertiser_id), (SELECT name FROM companies WHERE id = affiliate_id)`

func scanPayout(row pgx.Row) (Payout, error) {
	var p Payout
	err := row.Scan(&p.ID, &p.AdvertiserID, &p.AffiliateID, &p.Currency, &p.PeriodStart, &p.PeriodEnd, &p.Amount,
		&p.CommissionCount, &p.Status, &p.CreatedAt, &p.UpdatedAt, &p.AdvertiserName, &p.AffiliateName)
	if errors.Is(err, pgx.ErrNoRows) {
		return Payout{}, ErrNotFound
	}
	for _, t := range []*time.Time{&p.PeriodStart, &p.PeriodEnd, &p.CreatedAt, &p.UpdatedAt} {
		*t = t.UTC()
	}
	return p, err
}
