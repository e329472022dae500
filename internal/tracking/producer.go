package tracking

import (
	"context"
	"sync"

	"github.com/partnerstream/partnerstream/internal/kafka"
)

// producer hands the recorder's groups of clicks (the ack mode's concurrent clicks, the
// async queue's backlog, replay windows) to the Kafka producer in the background. A click's
// key is its id, so a retried request or a spool replay puts every copy of a click on the
// partition of its first try, where one ingest replica sees them all.
type producer struct {
	kp     *kafka.Producer
	writes sync.WaitGroup
}

func newProducer(cfg kafka.Config, topic string) *producer {
	return &producer{kp: kafka.NewProducer(cfg, topic, kafka.ProducerOptions{
		Attempts: writeAttempts, AttemptTimeout: writeTimeout, BackoffMin: writeBackoffMin, BackoffMax: writeBackoffMax,
	})}
}

// start writes items in the background and calls done with each item's error, or nil
// when every in-sync replica acknowledged them all.
func (p *producer) start(items []item, done func(errs []error)) {
	p.writes.Go(func() {
		recs := make([]kafka.Record, len(items))
		for i, it := range items {
			recs[i] = kafka.Record{Key: it.key(), Value: it.payload}
		}
		done(p.kp.Produce(context.Background(), recs))
	})
}

// shutdown waits for the writes under way and closes the connections.
func (p *producer) shutdown() {
	p.writes.Wait()
	p.kp.Close()
}
