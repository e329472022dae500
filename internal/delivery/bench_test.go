package delivery

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/partnerstream/partnerstream/internal/events"
	"github.com/partnerstream/partnerstream/internal/kafka"
	"github.com/partnerstream/partnerstream/internal/testenv"
)

// benchCompanies have one webhook each; every event goes from one of the first half to one
// of the second, so it makes two deliveries.
const benchCompanies = 40

// benchSetup is a database, a broker, a receiver answering 204 at once, and the
// subscriptions of benchCompanies companies to conversion.created on it.
func benchSetup(b *testing.B, receive func(body []byte)) (*pgxpool.Pool, *subs, []string, kafka.Config, string) {
	b.Helper()
	b.StopTimer()
	_, db := migratedWithURL(b)
	cos := addCompanies(b, db, benchCompanies)
	cfg := newKafka(b)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if receive != nil {
			receive(body)
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	b.Cleanup(srv.Close)
	sub := newSubs()
	for _, co := range cos {
		sub.add(co, srv.URL+"/hook", events.ConversionCreated)
	}
	return db, sub, cos, cfg, srv.URL + "/hook"
}

func benchEvent(cos []string, i int, at time.Time) events.Envelope {
	half := len(cos) / 2
	e := envelope(events.ConversionCreated, cos[i%half], cos[half+(i/half)%half])
	e.OccurredAt = at
	return e
}

func messages(envs []events.Envelope) []kafka.Record {
	msgs := make([]kafka.Record, len(envs))
	for i, e := range envs {
		v, _ := json.Marshal(e)
		msgs[i] = kafka.Record{Key: []byte(e.ID), Value: v}
	}
	return msgs
}

// BenchmarkDeliverThroughput measures signed deliveries per second end to end: events
// produced to Kafka (from when the first is produced), consumed, recorded, claimed, signed, sent and recorded as succeeded. In
// the same run a plain loop POSTs the same bodies, unsigned, with as many goroutines and no
// bookkeeping: the ceiling of this machine.
func BenchmarkDeliverThroughput(b *testing.B) {
	const nEvents = 20000
	db, sub, cos, cfg, url := benchSetup(b, nil)
	envs := make([]events.Envelope, nEvents)
	bodies := make([][]byte, 0, 2*nEvents)
	for i := range envs {
		envs[i] = benchEvent(cos, i, time.Now())
		body, _ := events.WebhookBody(envs[i])
		bodies = append(bodies, body, body)
	}
	s := newService(b, db, Options{Kafka: cfg, Subscriptions: sub})
	stop := testenv.Run(b, s)
	succeeded := func() int {
		var n int
		if err := db.QueryRow(context.Background(), `SELECT count(*) FROM deliveries WHERE status = 'succeeded'`).Scan(&n); err != nil {
			b.Fatal(err)
		}
		return n
	}
	// The consumer joins its group before the clock starts.
	produce(b, cfg, benchEvent(cos, 0, time.Now()))
	for succeeded() != 2 {
		time.Sleep(20 * time.Millisecond)
	}

	b.StartTimer()
	began := time.Now()
	produced := make(chan error, 1)
	go func() {
		w := kafka.NewProducer(cfg, kafka.TopicEvents, kafka.ProducerOptions{})
		defer w.Close()
		msgs := messages(envs)
		for len(msgs) > 0 {
			n := min(len(msgs), 5000)
			if err := kafka.FirstError(w.Produce(context.Background(), msgs[:n])); err != nil {
				produced <- err
				return
			}
			msgs = msgs[n:]
		}
		produced <- nil
	}()
	want := 2 + 2*nEvents
	for {
		n := succeeded()
		if n == want {
			break
		}
		if time.Since(began) > 5*time.Minute {
			b.Fatalf("only %d of %d deliveries succeeded in 5 minutes", n, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
	elapsed := time.Since(began)
	b.StopTimer()
	if err := <-produced; err != nil {
		b.Fatal(err)
	}
	stop()

	plain := plainLoop(b, url, bodies, DefaultWorkers)
	want -= 2
	engine := float64(want) / elapsed.Seconds()
	b.ReportMetric(engine, "deliveries/s")
	b.ReportMetric(plain, "plain-posts/s")
	b.ReportMetric(100*engine/plain, "%-of-plain")
	fmt.Printf("deliver: %d signed deliveries (%d events) in %.2fs = %.0f deliveries/s; plain unsigned POST loop: %.0f/s; ratio %.1f%%\n",
		want, nEvents, elapsed.Seconds(), engine, plain, 100*engine/plain)
}

// plainLoop POSTs the bodies with workers goroutines and returns how many per second.
func plainLoop(b *testing.B, url string, bodies [][]byte, workers int) float64 {
	b.Helper()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: workers}}
	defer client.CloseIdleConnections()
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= len(bodies) {
					return
				}
				resp, err := client.Post(url, "application/json", bytes.NewReader(bodies[i]))
				if err != nil {
					b.Error(err)
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
	wg.Wait()
	return float64(len(bodies)) / time.Since(start).Seconds()
}

// BenchmarkDeliverLatency produces 1,000 events per second for 15 s, each making two
// deliveries, and measures the time from an event's creation to its arrival at the receiver.
func BenchmarkDeliverLatency(b *testing.B) {
	const rate, seconds = 1000, 15
	var mu sync.Mutex
	var latencies []time.Duration
	db, sub, cos, cfg, _ := benchSetup(b, func(body []byte) {
		var v struct{ Timestamp time.Time }
		if json.Unmarshal(body, &v) == nil {
			mu.Lock()
			latencies = append(latencies, time.Since(v.Timestamp))
			mu.Unlock()
		}
	})
	s := newService(b, db, Options{Kafka: cfg, Subscriptions: sub})
	stop := testenv.Run(b, s)
	// Let the consumer join its group before the clock starts.
	produce(b, cfg, benchEvent(cos, 0, time.Now()))
	for {
		mu.Lock()
		n := len(latencies)
		mu.Unlock()
		if n == 2 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	mu.Lock()
	latencies = latencies[:0]
	mu.Unlock()

	b.StartTimer()
	w := kafka.NewProducer(cfg, kafka.TopicEvents, kafka.ProducerOptions{})
	defer w.Close()
	tick := time.NewTicker(10 * time.Millisecond) // 10 events every 10 ms
	defer tick.Stop()
	sent := 0
	for sent < rate*seconds {
		<-tick.C
		envs := make([]events.Envelope, rate/100)
		for i := range envs {
			envs[i] = benchEvent(cos, sent+i, time.Now())
		}
		if err := kafka.FirstError(w.Produce(context.Background(), messages(envs))); err != nil {
			b.Fatal(err)
		}
		sent += len(envs)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		mu.Lock()
		n := len(latencies)
		mu.Unlock()
		if n >= 2*sent || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	b.StopTimer()
	stop()
	mu.Lock()
	defer mu.Unlock()
	if len(latencies) < 2*sent {
		b.Fatalf("%d of %d deliveries arrived", len(latencies), 2*sent)
	}
	slices.Sort(latencies)
	p50, p95, p99 := latencies[len(latencies)/2], latencies[len(latencies)*95/100], latencies[len(latencies)*99/100]
	b.ReportMetric(float64(p50.Milliseconds()), "p50-ms")
	b.ReportMetric(float64(p95.Milliseconds()), "p95-ms")
	fmt.Printf("deliver: event-to-delivery latency at %d events/s (%d deliveries/s) for %d s: p50 %s, p95 %s, p99 %s, max %s\n",
		rate, 2*rate, seconds, p50.Round(time.Millisecond), p95.Round(time.Millisecond), p99.Round(time.Millisecond),
		latencies[len(latencies)-1].Round(time.Millisecond))
}

// BenchmarkDeliverDeadEndpoint measures healthy deliveries per second with 20 healthy
// endpoints, then with the same 20 beside one that never answers and gets a share of the
// deliveries, alternately, each round on a fresh database: a dead receiver should cost the
// others little (docs/webhooks.md, "Dead receivers").
func BenchmarkDeliverDeadEndpoint(b *testing.B) {
	const healthy, perHealthy, rounds = 20, 500, 3
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusNoContent)
	}))
	b.Cleanup(srv.Close)
	dead := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
	b.Cleanup(dead.Close)
	run := func(withDead bool) float64 {
		_, db := migratedWithURL(b)
		n := healthy
		if withDead {
			n++
		}
		cos := addCompanies(b, db, n)
		sub := newSubs()
		var healthyIDs []string
		for i, co := range cos {
			url := srv.URL + "/hook"
			if i == healthy {
				url = dead.URL + "/hook"
			}
			t, _ := sub.add(co, url, events.ConversionCreated)
			if i < healthy {
				healthyIDs = append(healthyIDs, t.ID)
			}
		}
		s := newService(b, db, Options{Subscriptions: sub})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); _ = s.dispatch(ctx) }()
		if withDead {
			// Measure the steady state of a dead receiver: wait until its first attempts
			// timed out (15 s) and opened its breaker.
			var envs []events.Envelope
			for range 2 * breakerThreshold {
				envs = append(envs, envelope(events.ConversionCreated, cos[healthy], ""))
			}
			if _, err := s.record(context.Background(), envs); err != nil {
				b.Fatal(err)
			}
			for open := false; !open; time.Sleep(100 * time.Millisecond) {
				if err := db.QueryRow(context.Background(), `SELECT EXISTS (SELECT 1 FROM delivery_endpoints WHERE open_until IS NOT NULL)`).Scan(&open); err != nil {
					b.Fatal(err)
				}
			}
		}
		// Every endpoint, the dead one too, gets perHealthy deliveries, interleaved.
		began := time.Now()
		for range perHealthy / 50 {
			var envs []events.Envelope
			for range 50 {
				for _, co := range cos {
					envs = append(envs, envelope(events.ConversionCreated, co, ""))
				}
			}
			if _, err := s.record(context.Background(), envs); err != nil {
				b.Fatal(err)
			}
			signal(s.wake)
		}
		want := healthy * perHealthy
		for {
			var got int
			if err := db.QueryRow(context.Background(), `SELECT count(*) FROM deliveries WHERE status = 'succeeded' AND target_id = ANY($1)`, healthyIDs).Scan(&got); err != nil {
				b.Fatal(err)
			}
			if got == want {
				break
			}
			if time.Since(began) > 5*time.Minute {
				b.Fatalf("only %d of %d healthy deliveries succeeded in 5 minutes", got, want)
			}
			time.Sleep(20 * time.Millisecond)
		}
		rate := float64(want) / time.Since(began).Seconds()
		cancel()
		<-done
		return rate
	}
	b.StartTimer()
	var with, without []float64
	for range rounds {
		without = append(without, run(false))
		with = append(with, run(true))
	}
	b.StopTimer()
	slices.Sort(with)
	slices.Sort(without)
	w, wo := with[len(with)/2], without[len(without)/2]
	b.ReportMetric(w, "deliveries/s-with-dead")
	b.ReportMetric(wo, "deliveries/s-without")
	b.ReportMetric(100*w/wo, "%-kept")
	fmt.Printf("deliver: %d healthy endpoints: %.0f deliveries/s alone, %.0f/s beside one that never answers (rounds %v and %v): %.1f%% kept\n",
		healthy, wo, w, without, with, 100*w/wo)
}
