// Package outbox is the transactional outbox: a domain change writes its events into the
// outbox table in the same Postgres transaction, and the relay publishes them to Kafka
// afterwards. An event is never lost (it commits with the change) and may be published more
// than once after a crash (consumers dedupe by event id).
package outbox

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/partnerstream/partnerstream/internal/events"
	"github.com/partnerstream/partnerstream/internal/ids"
)

// Execer is a transaction, or a batch queued to run in one (conversions.queue).
type Execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// Write records an event in the caller's transaction. aggregateID is the Kafka key (the
// conversion, partnership, ... the event is about), so one aggregate's events stay in order.
// A zero ID or OccurredAt is filled in; the envelope as stored is returned.
func Write(ctx context.Context, tx Execer, aggregateID string, e events.Envelope) (events.Envelope, error) {
	if e.ID == "" {
		e.ID = ids.New(ids.Event)
	}
	if e.OccurredAt.IsZero() {
		e.OccurredAt = time.Now().UTC()
	}
	body, err := json.Marshal(e)
	if err != nil {
		return events.Envelope{}, fmt.Errorf("outbox: encode %s: %w", e.Type, err)
	}
	if _, err := tx.Exec(ctx,
		`INSERT INTO outbox (event_id, type, aggregate_id, envelope, created_at) VALUES ($1, $2, $3, $4, $5)`,
		e.ID, e.Type, aggregateID, body, e.OccurredAt); err != nil {
		return events.Envelope{}, fmt.Errorf("outbox: write %s: %w", e.Type, err)
	}
	return e, nil
}
