package delivery

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/partnerstream/partnerstream/internal/events"
	"github.com/partnerstream/partnerstream/internal/health"
	"github.com/partnerstream/partnerstream/internal/testenv"
)

func TestEventsOnKafkaAreDeliveredOncePerTarget(t *testing.T) {
	t.Parallel()
	db, cos := newDB(t, 4)
	cfg := newKafka(t)
	rc := newReceiver(t, nil)
	sub, pb := newSubs(), newPostbacks()
	secrets := map[string]string{}
	for _, co := range cos {
		_, secrets[co] = sub.add(co, rc.URL+"/webhook", events.ConversionCreated, events.CommissionStatusChanged)
	}
	postbackSecret := pb.set(cos[0], rc.URL+"/postback")
	h := health.NewRegistry()
	s := newService(t, db, Options{Kafka: cfg, Subscriptions: sub, Postbacks: pb, Health: h})

	var envs []events.Envelope
	for i := range 50 {
		envs = append(envs, envelope(events.ConversionCreated, cos[i%2], cos[2+i%2]))
		envs = append(envs, envelope(events.CommissionStatusChanged, cos[i%2], cos[2+i%2]))
		// Ingest's own record on the topic (docs/stats.md) goes to nobody.
		envs = append(envs, events.Envelope{ID: fmt.Sprintf("evt_arrived_%d", i), Type: events.ClickArrived, OccurredAt: time.Now(),
			Data: []byte(`{"conversion_id":"cnv_1","click_id":"clk_1","sub1":"email"}`)})
	}
	// A relay crash publishes some events twice.
	produce(t, cfg, append(envs, envs[:30]...)...)
	stop := testenv.Run(t, s)
	// 50 created x 2 webhooks + 50 changed x 2 webhooks + 25 postbacks of cos[0].
	const want = 225
	eventually(t, time.Minute, func() error {
		if n := len(rows(t, db, "WHERE status = 'succeeded'")); n != want {
			return fmt.Errorf("%d of %d deliveries succeeded", n, want)
		}
		return nil
	})
	if r := h.Ready(context.Background()); !r.Ready {
		t.Errorf("not ready while delivering: %v", r.Checks)
	}
	// Events consumed again (a new consumer group from the start) record nothing new.
	again := newService(t, db, Options{Kafka: cfg, Group: "replay", Subscriptions: sub, Postbacks: pb})
	stopAgain := testenv.Run(t, again)
	time.Sleep(2 * time.Second)
	stopAgain()
	stop()

	if n := len(rows(t, db, "")); n != want {
		t.Errorf("%d deliveries, want %d: one per event and target", n, want)
	}
	sent := map[string]int{}
	for _, r := range rc.requests() {
		sent[r.header.Get("webhook-id")]++
		secret := postbackSecret
		if r.header.Get(pathHeader) == "/webhook" {
			secret = ""
			for _, sec := range secrets {
				if verify(t, r, sec, true) == nil {
					secret = sec
				}
			}
		}
		if secret == "" || verify(t, r, secret, true) != nil {
			t.Errorf("delivery %s to %s does not verify", r.header.Get("webhook-id"), r.header.Get(pathHeader))
		}
	}
	if len(sent) != want {
		t.Errorf("%d deliveries received, want %d", len(sent), want)
	}
	for id, n := range sent {
		if n != 1 {
			t.Errorf("delivery %s received %d times", id, n)
		}
	}
}

func TestNotReadyUntilTheSubscriptionsSync(t *testing.T) {
	t.Parallel()
	db, _ := newDB(t, 1)
	h := health.NewRegistry()
	sync := make(chan struct{})
	s := newService(t, db, Options{Subscriptions: &blockingSubs{subs: newSubs(), synced: sync}, Health: h, Kafka: newKafka(t)})
	testenv.Run(t, s)
	if r := h.Ready(context.Background()); r.Ready {
		t.Error("ready before the subscriptions synced")
	}
	close(sync)
	eventually(t, 10*time.Second, func() error {
		if r := h.Ready(context.Background()); !r.Ready {
			return fmt.Errorf("not ready after the sync: %v", r.Checks)
		}
		return nil
	})
}

// blockingSubs sync when synced is closed.
type blockingSubs struct {
	*subs
	synced chan struct{}
}

func (b *blockingSubs) WaitForSync(ctx context.Context) error {
	select {
	case <-b.synced:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
