package conversions

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
)

// MaxBulk is the most conversions one bulk approval or rejection takes.
const MaxBulk = 100

// Failure is why one conversion of a bulk approval or rejection could not change.
type Failure struct {
	ID      string
	Code    string // not_found, invalid_transition, held (approving one on hold) or not_held (releasing one that is not)
	Status  string // the current status, when found
	Allowed []string
}

// BulkError lists every conversion of a bulk request that failed; nothing was changed.
type BulkError struct {
	To       string // the status asked for (approved or rejected), or Released
	Failures []Failure
}

func (e *BulkError) Error() string {
	return fmt.Sprintf("%d of the conversions cannot change; nothing was changed", len(e.Failures))
}

// ApproveMany approves up to MaxBulk conversions of the advertiser in one transaction: all
// or nothing. When any cannot be approved, nothing changes and the error is a *BulkError
// listing each failure.
func (s *Service) ApproveMany(ctx context.Context, advertiserID string, conversionIDs []string) ([]Conversion, error) {
	return s.changeMany(ctx, advertiserID, conversionIDs, Approved, "")
}

// RejectMany rejects up to MaxBulk conversions of the advertiser, keeping the same reason for
// each, like ApproveMany: all or nothing, a *BulkError listing each failure.
func (s *Service) RejectMany(ctx context.Context, advertiserID string, conversionIDs []string, reason string) ([]Conversion, error) {
	return s.changeMany(ctx, advertiserID, conversionIDs, Rejected, reason)
}

// changeMany moves the commissions of the advertiser's conversions to status to in one
// transaction, and returns them in the order of conversionIDs. Every id is checked before
// anything changes, so that a failure lists them all.
func (s *Service) changeMany(ctx context.Context, advertiserID string, conversionIDs []string, to, reason string) ([]Conversion, error) {
	if err := checkReason(reason); err != nil {
		return nil, err
	}
	return s.bulk(ctx, advertiserID, conversionIDs, to, func(c *Conversion) *Failure {
		switch m := c.Commission; {
		case !slices.Contains(transitions[m.Status], to):
			return &Failure{ID: c.ID, Code: "invalid_transition", Status: m.Status, Allowed: Allowed(m.Status)}
		case to == Approved && m.HeldAt != nil:
			return &Failure{ID: c.ID, Code: "held", Status: m.Status}
		}
		return nil
	}, func(tx pgx.Tx, c *Conversion, now time.Time) error { return move(ctx, tx, c, to, reason, now) })
}

// bulk changes up to MaxBulk of the advertiser's conversions in one transaction, all or
// nothing: every id is locked and checked (check says why one cannot change, nil when it
// can) before apply changes any, so that a *BulkError lists every failure. to names the
// change in the error. The conversions come back in the order of conversionIDs.
func (s *Service) bulk(ctx context.Context, advertiserID string, conversionIDs []string, to string,
	check func(*Conversion) *Failure, apply func(pgx.Tx, *Conversion, time.Time) error) ([]Conversion, error) {
	if err := checkBulk(conversionIDs); err != nil {
		return nil, err
	}
	var out []Conversion
	err := pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		locked, err := lock(ctx, tx, `v.id = ANY($1) AND v.advertiser_id = $2`, conversionIDs, advertiserID)
		if err != nil {
			return err
		}
		byID := make(map[string]*Conversion, len(locked))
		for i := range locked {
			byID[locked[i].ID] = &locked[i]
		}
		var failures []Failure
		for _, id := range conversionIDs {
			c, ok := byID[id]
			if !ok {
				failures = append(failures, Failure{ID: id, Code: "not_found"})
			} else if f := check(c); f != nil {
				failures = append(failures, *f)
			}
		}
		if failures != nil {
			return &BulkError{To: to, Failures: failures}
		}
		now := s.now()
		out = make([]Conversion, len(conversionIDs))
		for i, id := range conversionIDs {
			if err := apply(tx, byID[id], now); err != nil {
				return err
			}
			out[i] = *byID[id]
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("%s conversions: %w", to, err)
	}
	return out, nil
}

// checkBulk checks the ids of a bulk request: 1 to MaxBulk, none twice.
func checkBulk(conversionIDs []string) error {
	if len(conversionIDs) == 0 || len(conversionIDs) > MaxBulk {
		return invalid("ids", "must hold 1 to %d conversion ids", MaxBulk)
	}
	seen := make(map[string]bool, len(conversionIDs))
	for _, id := range conversionIDs {
		if seen[id] {
			return invalid("ids", "lists %s twice", id)
		}
		seen[id] = true
	}
	return nil
}
