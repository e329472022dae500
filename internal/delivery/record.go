package delivery

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/partnerstream/partnerstream/internal/events"
	"github.com/partnerstream/partnerstream/internal/ids"
	"github.com/partnerstream/partnerstream/internal/kafka"
	"github.com/partnerstream/partnerstream/internal/postbacks"
	"github.com/partnerstream/partnerstream/internal/run"
)

// linger is how long a batch of events waits for more after its first message: short, as
// it adds to every event's delivery latency.
const linger = 20 * time.Millisecond

// finalStoreTimeout bounds storing the batch in hand at shutdown; unstored, it is not
// committed and the group's next owner reads it again.
const finalStoreTimeout = 5 * time.Second

// consume records the deliveries of every event of the topic until ctx ends.
func (s *Service) consume(ctx context.Context) error {
	c, err := kafka.NewConsumer(s.o.Kafka, kafka.ConsumerOptions{Group: s.o.Group, Topic: kafka.TopicEvents,
		MinBytes: 1, MaxBytes: 1 << 20, MaxWait: 250 * time.Millisecond, Log: s.o.Log})
	if err != nil {
		return fmt.Errorf("deliver: %w", err)
	}
	return c.Run(ctx, s.assigned)
}

// message is an event read from Kafka.
type message struct {
	partition int
	offset    int64
	value     []byte
}

// recording is one consumer-group generation: the partitions' fetches are gathered into
// batches, and each batch is recorded and then committed.
type recording struct {
	fetches chan []message
	done    chan struct{}
}

func (s *Service) assigned(session *kafka.Session) kafka.Claim {
	r := &recording{fetches: make(chan []message, len(session.Partitions)+1), done: make(chan struct{})}
	go func() {
		defer close(r.done)
		s.recordLoop(session, r.fetches)
	}()
	return r
}

func (r *recording) Fetched(ctx context.Context, f *kafka.Fetch) {
	var msgs []message
	for offset, value := range f.Records() {
		msgs = append(msgs, message{partition: f.Partition, offset: offset, value: bytes.Clone(value)})
	}
	if len(msgs) == 0 {
		return
	}
	select {
	case r.fetches <- msgs:
	case <-ctx.Done():
	}
}

// Revoked waits for the batch in hand to be recorded and committed, or given up.
func (r *recording) Revoked() { <-r.done }

// recordLoop gathers the generation's messages into batches of at most ConsumeBatch and
// records each; when one cannot be recorded, it stops, as committing later ones would skip it.
func (s *Service) recordLoop(session *kafka.Session, fetches <-chan []message) {
	ctx := session.Context()
	batch := make([]message, 0, s.o.ConsumeBatch)
	run.Gather[[]message]{Size: s.o.ConsumeBatch, Linger: linger,
		Add: func(msgs []message, room int) (int, []message, bool) {
			n := min(room, len(msgs))
			batch = append(batch, msgs[:n]...)
			return n, msgs[n:], n < len(msgs)
		},
		Flush: func() bool {
			ok := s.storeAndCommit(ctx, session, batch)
			batch = batch[:0]
			return ok
		},
	}.Run(ctx, fetches)
}

// storeAndCommit records a batch, retrying while the generation (ctx) lasts (once it has
// ended, the batch gets one bounded try), then commits its offsets.
func (s *Service) storeAndCommit(ctx context.Context, session *kafka.Session, batch []message) bool {
	envs := make([]events.Envelope, 0, len(batch))
	next := map[int]int64{}
	for _, m := range batch {
		next[m.partition] = max(next[m.partition], m.offset+1)
		var e events.Envelope
		if err := json.Unmarshal(m.value, &e); err != nil || e.ID == "" || e.Type == "" {
			s.o.Log.Error("skipping an event that is not an envelope", "partition", m.partition, "offset", m.offset, "err", err)
			continue
		}
		envs = append(envs, e)
	}
	eventsConsumed.Add(float64(len(batch)))
	final := ctx.Err() != nil
	for attempt := 1; ; attempt++ {
		var sctx context.Context
		var cancel context.CancelFunc
		if final {
			sctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), finalStoreTimeout)
		} else {
			sctx, cancel = context.WithCancel(ctx)
		}
		_, err := s.record(sctx, envs)
		cancel()
		if err == nil {
			s.setFailure(nil)
			break
		}
		s.setFailure(fmt.Errorf("deliver: store deliveries: %w", err))
		s.o.Log.Error("storing deliveries failed", "attempt", attempt, "err", err)
		if final || ctx.Err() != nil || !run.Sleep(ctx, run.Backoff(attempt)) {
			return false
		}
	}
	if hook := s.afterRecord; hook != nil {
		hook(len(batch))
	}
	signal(s.wake)
	if err := session.Commit(next); err != nil {
		// Stored: a redelivery of this batch records nothing new.
		s.o.Log.Warn("commit failed; the events may be consumed again (and deduplicated)", "err", err)
	}
	return true
}

// newDelivery is a deliveries row to insert.
type newDelivery struct {
	id, companyID, kind, targetID, url, eventID, eventType string
	body                                                   []byte
}

// record inserts the deliveries of the events, one per (event, target), and returns how
// many were new.
func (s *Service) record(ctx context.Context, envs []events.Envelope) (int, error) {
	rows, err := s.targetsOf(ctx, envs)
	if err != nil || len(rows) == 0 {
		return 0, err
	}
	n := len(rows)
	cols := struct {
		id, company, kind, target, url, eventID, eventType []string
		body                                               [][]byte
	}{make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([][]byte, n)}
	for i, r := range rows {
		cols.id[i], cols.company[i], cols.kind[i], cols.target[i] = r.id, r.companyID, r.kind, r.targetID
		cols.url[i], cols.eventID[i], cols.eventType[i], cols.body[i] = r.url, r.eventID, r.eventType, r.body
	}
	// The join with companies drops a target of an unknown company instead of failing the
	// whole batch on the foreign key, which would block the partition forever.
	rs, err := s.o.DB.Query(ctx, `
INSERT INTO deliveries (id, company_id, kind, target_id, url, event_id, event_type, body, status, attempts,
                        next_attempt_at, next_trigger, created_at, updated_at)
SELECT u.id, u.company_id, u.kind, u.target_id, u.url, u.event_id, u.event_type, u.body, 'pending', 0, $9, 'scheduled', $9, $9
FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::bytea[])
     AS u(id, company_id, kind, target_id, url, event_id, event_type, body)
JOIN companies c ON c.id = u.company_id
ON CONFLICT (event_id, kind, target_id) DO NOTHING
RETURNING kind`,
		cols.id, cols.company, cols.kind, cols.target, cols.url, cols.eventID, cols.eventType, cols.body, s.o.Now())
	if err != nil {
		return 0, fmt.Errorf("insert %d deliveries: %w", n, err)
	}
	inserted := map[string]int{}
	var kind string
	_, err = pgx.ForEachRow(rs, []any{&kind}, func() error { inserted[kind]++; return nil })
	if err != nil {
		return 0, fmt.Errorf("insert %d deliveries: %w", n, err)
	}
	for k, c := range inserted {
		recordedTotal.WithLabelValues(k).Add(float64(c))
	}
	return inserted[KindWebhook] + inserted[KindPostback], nil
}

// targetsOf lists the deliveries of the events: the webhooks of both companies subscribed
// to each event's type and, for the postback types (events.PostbackTypes), both companies'
// postback URLs.
func (s *Service) targetsOf(ctx context.Context, envs []events.Envelope) ([]newDelivery, error) {
	var out []newDelivery
	postbackURLs := map[string]string{} // by company, "" for none: one lookup per batch
	now := s.o.Now()
	for _, e := range envs {
		body, err := events.WebhookBody(e)
		if err != nil {
			return nil, err
		}
		for _, company := range companiesOf(e) {
			add := func(kind, target, url string) {
				out = append(out, newDelivery{id: ids.New(ids.Delivery), companyID: company, kind: kind, targetID: target,
					url: url, eventID: e.ID, eventType: e.Type, body: body})
			}
			if s.o.Subscriptions != nil {
				for _, t := range s.o.Subscriptions.Targets(company, e.Type) {
					add(KindWebhook, t.ID, t.URL)
				}
			}
			if !slices.Contains(events.PostbackTypes, e.Type) || s.o.Postbacks == nil {
				continue
			}
			url, seen := postbackURLs[company]
			if !seen {
				u, _, err := s.o.Postbacks.SigningKeys(ctx, company, now)
				switch {
				case errors.Is(err, postbacks.ErrNotConfigured):
				case err != nil:
					return nil, err
				default:
					url = u
				}
				postbackURLs[company] = url
			}
			if url != "" {
				add(KindPostback, company, postbacks.ExpandURL(url, body))
			}
		}
	}
	return out, nil
}

// companiesOf are the companies that receive an event: its advertiser and its affiliate.
func companiesOf(e events.Envelope) []string {
	switch {
	case e.AdvertiserID == "" && e.AffiliateID == "":
		return nil
	case e.AffiliateID == "" || e.AffiliateID == e.AdvertiserID:
		return []string{e.AdvertiserID}
	case e.AdvertiserID == "":
		return []string{e.AffiliateID}
	}
	return []string{e.AdvertiserID, e.AffiliateID}
}
