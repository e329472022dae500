package conversions

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/partnerstream/partnerstream/internal/events"
	"github.com/partnerstream/partnerstream/internal/fraud"
)

// decide runs the registration-stage fraud rules of the program on conversion c, in the
// registration's transaction, given the duplicates the insert found (f). The time rules read
// nothing (the click id carries the click time); self-referral reads the affiliate's users,
// only when there is a customer e-mail and the rule runs for the partnership.
func (s *Service) decide(ctx context.Context, tx pgx.Tx, rules fraud.Settings, exempt []string, c Conversion, email *fraud.Email,
	f fraud.Facts, now time.Time) ([]fraud.Finding, error) {
	f.ClickedAt, f.OccurredAt, f.Email = c.ClickedAt, c.OccurredAt, email
	if email != nil && rules.Active(fraud.SelfReferral, exempt) {
		rows, err := tx.Query(ctx, `SELECT email FROM users WHERE company_id = $1`, c.AffiliateID)
		if err != nil {
			return nil, fmt.Errorf("read the affiliate's users: %w", err)
		}
		emails, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return nil, fmt.Errorf("read the affiliate's users: %w", err)
		}
		f.SelfReferral = fraud.MatchAffiliate(*email, emails)
	}
	return fraud.Decide(rules, exempt, f, now), nil
}

// Release takes up to MaxBulk of the advertiser's held commissions off hold, in one
// transaction: all or nothing, a *BulkError naming each conversion that is not found or not
// held. Each goes back to the normal flow (the hold days may approve it) and emits
// commission.released.
func (s *Service) Release(ctx context.Context, advertiserID string, conversionIDs []string) ([]Conversion, error) {
	return s.bulk(ctx, advertiserID, conversionIDs, Released, func(c *Conversion) *Failure {
		if c.Commission.HeldAt == nil {
			return &Failure{ID: c.ID, Code: "not_held", Status: c.Commission.Status}
		}
		return nil
	}, func(tx pgx.Tx, c *Conversion, now time.Time) error {
		m := &c.Commission
		if err := tx.QueryRow(ctx, `UPDATE commissions SET held_at = NULL, version = version + 1, updated_at = $2
			WHERE id = $1 RETURNING version`, m.ID, now).Scan(&m.Version); err != nil {
			return fmt.Errorf("release commission %s: %w", m.ID, err)
		}
		m.HeldAt, m.UpdatedAt = nil, now
		return emitTypes(ctx, tx, *c, "", events.CommissionReleased)
	})
}

// Released names a release in a *BulkError (BulkError.To): it is no status.
const Released = "released"

// AddVerdicts records findings of a later stage (fraud.StageClick: once ingest knows the
// click) on an existing conversion's commission, in one transaction. When an acting finding
// holds and the commission is neither held nor decided for good (pending, or approved and in
// no payout), it is put on hold with its version increased and commission.held emitted.
// A rule that already has a verdict on the commission keeps its first one. It returns the
// conversion as it is now.
func (s *Service) AddVerdicts(ctx context.Context, conversionID string, findings []fraud.Finding) (Conversion, error) {
	var c Conversion
	err := pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		locked, err := lock(ctx, tx, `v.id = $1`, conversionID)
		if err != nil {
			return err
		}
		if len(locked) == 0 {
			return ErrNotFound
		}
		c, err = s.addVerdicts(ctx, tx, locked[0], findings)
		return err
	})
	if err != nil {
		return Conversion{}, fmt.Errorf("add verdicts to conversion %s: %w", conversionID, err)
	}
	return c, nil
}

// addVerdicts is AddVerdicts on c, which the caller locked in tx.
func (s *Service) addVerdicts(ctx context.Context, tx pgx.Tx, c Conversion, findings []fraud.Finding) (Conversion, error) {
	m := c.Commission
	if len(findings) == 0 {
		return c, nil
	}
	if err := fraud.Record(ctx, tx, m.ID, findings); err != nil {
		return Conversion{}, err
	}
	open := m.Status == Pending || (m.Status == Approved && m.PayoutID == "")
	hold := fraud.Holds(findings) && m.HeldAt == nil && open
	if hold {
		if _, err := tx.Exec(ctx, `UPDATE commissions SET held_at = $2, version = version + 1, updated_at = $2 WHERE id = $1`,
			m.ID, s.now()); err != nil {
			return Conversion{}, fmt.Errorf("hold commission %s: %w", m.ID, err)
		}
	}
	// Read back as stored: a rule decided before keeps its first verdict.
	locked, err := lock(ctx, tx, `v.id = $1`, c.ID)
	if err != nil {
		return Conversion{}, err
	}
	c = locked[0]
	if hold {
		return c, emitTypes(ctx, tx, c, "", events.CommissionHeld)
	}
	return c, nil
}
