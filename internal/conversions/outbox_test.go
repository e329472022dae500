package conversions_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/partnerstream/partnerstream/internal/conversions"
	"github.com/partnerstream/partnerstream/internal/events"
	"github.com/partnerstream/partnerstream/internal/ids"
	"github.com/partnerstream/partnerstream/internal/kafka"
	"github.com/partnerstream/partnerstream/internal/outbox"
	"github.com/partnerstream/partnerstream/internal/testenv"
)

// dyingWriter produces the first half of its nth batch, then "kills" the relay: it cancels
// the relay's context and fails, as a process killed between producing and committing would.
type dyingWriter struct {
	outbox.Producer
	n      int
	cancel context.CancelFunc
	calls  int
	wrote  int // messages produced by the dying call
}

func (d *dyingWriter) Produce(ctx context.Context, recs []kafka.Record) []error {
	if d.calls++; d.calls < d.n {
		return d.Producer.Produce(ctx, recs)
	}
	half := recs[:len(recs)/2]
	if errs := d.Producer.Produce(ctx, half); errs != nil {
		return errs
	}
	d.wrote = len(half)
	d.cancel()
	errs := make([]error, len(recs))
	errs[len(half)] = errors.New("killed")
	return errs
}

func TestEveryChangeIsPublishedEvenWhenTheRelayIsKilledMidBatch(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	cfg := kafka.Config{Brokers: testenv.Kafka(t), Partitions: 3, ReplicationFactor: 1, Retention: time.Hour}
	if err := kafka.EnsureTopics(ctx, cfg, kafka.TopicEvents); err != nil {
		t.Fatal(err)
	}
	w := kafka.NewProducer(cfg, kafka.TopicEvents, kafka.ProducerOptions{})
	defer w.Close()

	// 30 registrations (2 events each), 10 approvals (2), 5 rejections (2), 3 reversals (1).
	var convs []conversions.Conversion
	for range 30 {
		convs = append(convs, e.register(t, ids.New("ord"), "12.34"))
	}
	change := func(c conversions.Conversion, to string) {
		if _, err := e.svc.ChangeStatus(ctx, e.adv, c.ID, to, ""); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range convs[:10] {
		change(c, conversions.Approved)
	}
	for _, c := range convs[10:15] {
		change(c, conversions.Rejected)
	}
	for _, c := range convs[:3] {
		change(c, conversions.Reversed)
	}
	const changes = 30*2 + 10*2 + 5*2 + 3
	if n := e.count(t, `SELECT count(*) FROM outbox`); n != changes {
		t.Fatalf("%d outbox events, want %d", n, changes)
	}

	// The first relay dies half-way through its third batch of 10.
	rctx, kill := context.WithCancel(ctx)
	dying := &dyingWriter{Producer: w, n: 3, cancel: kill}
	if err := outbox.NewRelay(e.db, dying, outbox.RelayOptions{BatchSize: 10, Log: quiet}).Run(rctx); err != nil {
		t.Fatal(err)
	}
	if dying.wrote == 0 {
		t.Fatal("the relay was not killed mid-batch")
	}
	if n := e.count(t, `SELECT count(*) FROM outbox WHERE published_at IS NOT NULL`); n != 20 {
		t.Fatalf("%d events marked published after the kill, want the 2 committed batches (20)", n)
	}
	// A change while the relay is down, then a new relay.
	change(convs[20], conversions.Approved)
	rctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		_ = outbox.NewRelay(e.db, w, outbox.RelayOptions{BatchSize: 10, PollInterval: 10 * time.Millisecond, Log: quiet}).Run(rctx)
	}()

	want := map[string]events.Envelope{}
	rows, err := e.db.Query(ctx, `SELECT envelope FROM outbox`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var env events.Envelope
		var raw []byte
		if err := rows.Scan(&raw); err != nil {
			t.Fatal(err)
		}
		_ = json.Unmarshal(raw, &env)
		want[env.ID] = env
	}
	if len(want) != changes+2 {
		t.Fatalf("%d outbox events, want %d", len(want), changes+2)
	}

	// Consume everything: each event at least once, repeats only from the killed batch.
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var msgs []kafka.Message
	for len(msgs) < len(want)+dying.wrote {
		var err error
		if msgs, err = kafka.ReadAll(cctx, cfg, kafka.TopicEvents); err != nil {
			t.Fatalf("%d of %d messages: %v", len(msgs), len(want)+dying.wrote, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	seen := map[string]int{}
	latest := map[string]int64{} // conversion -> version, in consumption order after dedupe
	for _, m := range msgs {
		var env events.Envelope
		if err := json.Unmarshal(m.Value, &env); err != nil {
			t.Fatal(err)
		}
		var d events.ConversionData
		_ = json.Unmarshal(env.Data, &d)
		if string(m.Key) != d.ID {
			t.Fatalf("event %s keyed %q, want its conversion %s", env.ID, m.Key, d.ID)
		}
		if seen[env.ID]++; seen[env.ID] > 1 {
			continue
		}
		if d.Version < latest[d.ID] {
			t.Fatalf("conversion %s: version %d after %d", d.ID, d.Version, latest[d.ID])
		}
		latest[d.ID] = d.Version
	}
	repeats := 0
	for id := range want {
		switch n := seen[id]; {
		case n == 0:
			t.Errorf("event %s (%s) was never published", id, want[id].Type)
		case n > 2:
			t.Errorf("event %s published %d times", id, n)
		case n == 2:
			repeats++
		}
	}
	if len(seen) != len(want) || repeats != dying.wrote {
		t.Fatalf("%d distinct events (want %d), %d repeats (want the %d the killed batch produced)", len(seen), len(want), repeats, dying.wrote)
	}
	// Nothing more is coming.
	time.Sleep(500 * time.Millisecond)
	if all, err := kafka.ReadAll(ctx, cfg, kafka.TopicEvents); err != nil || len(all) != len(msgs) {
		t.Fatalf("%d messages half a second later, want %d (err %v)", len(all), len(msgs), err)
	}
}
