package conversions

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// ErrAlreadyPaid: the commission was paid out, so a refund cannot take it back here.
var ErrAlreadyPaid = errors.New("the commission was already paid")

// Reverse takes back the commission of the conversion with this external id in the
// advertiser's program, for a refund or a chargeback the advertiser's billing reported: a
// pending commission is rejected, an approved one reversed, each with reason. One already
// rejected or reversed is left as it is (changed false), so a repeated report changes
// nothing. A paid commission is ErrAlreadyPaid, one in a pending payout ErrInPayout, and no
// such conversion ErrNotFound.
func (s *Service) Reverse(ctx context.Context, advertiserID, programID, externalID, reason string) (Conversion, bool, error) {
	if err := checkReason(reason); err != nil {
		return Conversion{}, false, err
	}
	var c Conversion
	changed := false
	err := pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		locked, err := lock(ctx, tx, `v.program_id = $1 AND v.external_id = $2 AND v.advertiser_id = $3`,
			programID, externalID, advertiserID)
		if err != nil {
			return err
		}
		if len(locked) == 0 {
			return ErrNotFound
		}
		c = locked[0]
		switch c.Commission.Status {
		case Rejected, Reversed:
			return nil
		case Paid:
			return ErrAlreadyPaid
		case Pending:
			changed = true
			return move(ctx, tx, &c, Rejected, reason, s.now())
		default:
			changed = true
			return move(ctx, tx, &c, Reversed, reason, s.now())
		}
	})
	if err != nil {
		return Conversion{}, false, fmt.Errorf("reverse conversion %s of program %s: %w", externalID, programID, err)
	}
	return c, changed, nil
}
