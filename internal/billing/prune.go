package billing

import (
	"context"
	"fmt"
	"time"
)

// EventRetention is how long a received event's id is kept to recognise a redelivery, and an
// unmatched refund or dispute to wait for its payment. Stripe retries an event for three days
// and lets an operator resend one for thirty; a chargeback can come months after its payment,
// but it is matched through stripe_payments, which stays as long as its conversion.
const EventRetention = 90 * 24 * time.Hour

// Prune deletes the event ids and the unmatched reversals older than EventRetention, so the
// tables do not grow for ever with every event Stripe sends.
func (s *Service) Prune(ctx context.Context) (int64, error) {
	cutoff := s.now().Add(-EventRetention)
	var n int64
	for _, table := range []string{"stripe_events", "stripe_reversals"} {
		tag, err := s.db.Exec(ctx, `DELETE FROM `+table+` WHERE received_at < $1`, cutoff)
		if err != nil {
			return n, fmt.Errorf("billing: prune %s: %w", table, err)
		}
		n += tag.RowsAffected()
	}
	return n, nil
}
