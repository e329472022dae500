package ingest

import (
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/partnerstream/partnerstream/internal/health"
	"github.com/partnerstream/partnerstream/internal/kafka"
	"github.com/partnerstream/partnerstream/internal/metrics/metricstest"
	"github.com/partnerstream/partnerstream/internal/testenv"
)

// waitFor polls cond until it holds or the timeout passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestBatchesAreBoundedBySizeAndByTime(t *testing.T) {
	// Not parallel: it reads the package's metrics.
	e := newEnv(t)
	d := newDataset(3, 1000)
	d.clicks = d.clicks[:1000]
	s := e.service(t, Options{BatchSize: 100, BatchInterval: 300 * time.Millisecond})
	var mu sync.Mutex
	var sizes []int
	s.afterWrite = func(topic string, n int) {
		if topic == kafka.TopicClicks {
			mu.Lock()
			sizes = append(sizes, n)
			mu.Unlock()
		}
	}
	rowsBefore := metric(t, "partnerstream_ingest_rows_total", "table", tableClicks)
	batchesBefore := metric(t, "partnerstream_ingest_batch_size_messages", "topic", kafka.TopicClicks)
	testenv.Run(t, s)
	e.produce(t, kafka.TopicClicks, d.clickMessages())
	e.waitCaughtUp(t, DefaultGroupPrefix+"-clicks", kafka.TopicClicks, 30*time.Second)
	mu.Lock()
	total := 0
	for _, n := range sizes {
		total += n
		if n > 100 {
			t.Errorf("a batch of %d messages, want at most 100", n)
		}
	}
	mu.Unlock()
	if total != len(d.clicks) {
		t.Errorf("batches held %d messages, want %d", total, len(d.clicks))
	}

	// One click never fills a batch: the interval writes it.
	lone := newDataset(4, 1)
	lone.clicks = lone.clicks[:1]
	produced := time.Now()
	e.produce(t, kafka.TopicClicks, lone.clickMessages())
	query := "SELECT count() FROM " + e.db + ".clicks WHERE click_id = '" + lone.clicks[0].ClickID + "'"
	waitFor(t, 5*time.Second, "a lone click stored", func() bool { return e.count(t, query) == 1 })
	t.Logf("a lone click was queryable %v after it was produced (interval 300ms)", time.Since(produced).Round(time.Millisecond))
	e.waitCaughtUp(t, DefaultGroupPrefix+"-clicks", kafka.TopicClicks, 10*time.Second)

	if got := metric(t, "partnerstream_ingest_rows_total", "table", tableClicks) - rowsBefore; got != float64(d.distinctClicks()+1) {
		t.Errorf("rows_total{table=clicks} grew by %v, want %d", got, d.distinctClicks()+1)
	}
	mu.Lock()
	if got := metric(t, "partnerstream_ingest_batch_size_messages", "topic", kafka.TopicClicks) - batchesBefore; got != float64(len(sizes)) {
		t.Errorf("batch_size observed %v batches, want %d", got, len(sizes))
	}
	mu.Unlock()
	if lag := metric(t, "partnerstream_ingest_lag_messages", "topic", kafka.TopicClicks); lag != 0 {
		t.Errorf("lag_messages{topic=clicks} = %v after catching up, want 0", lag)
	}
}

// metric reads a series of the platform's registry (metricstest.Value).
func metric(t *testing.T, name, label, value string) float64 {
	t.Helper()
	return metricstest.Value(t, name, label, value)
}

func TestShutdownStoresAndCommitsTheBatchInHand(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	d := newDataset(5, 300)
	// Neither bound is reached: only the shutdown writes the batch.
	s := e.service(t, Options{BatchSize: 1_000_000, BatchInterval: time.Hour})
	stop := testenv.Run(t, s)
	e.produce(t, kafka.TopicClicks, d.clickMessages())
	waitFor(t, 30*time.Second, "every click in the batch", func() bool { return s.clicks.received.Load() == int64(len(d.clicks)) })
	if n := e.count(t, "SELECT count() FROM "+e.db+".clicks"); n != 0 {
		t.Fatalf("%d clicks stored before shutdown, want none yet", n)
	}
	stop()
	if got, want := e.count(t, "SELECT count() FROM "+e.db+".clicks"), uint64(d.distinctClicks()); got != want {
		t.Errorf("%d clicks stored at shutdown, want %d", got, want)
	}
	e.waitCaughtUp(t, DefaultGroupPrefix+"-clicks", kafka.TopicClicks, time.Second)
}

func TestReadinessReflectsClickHouseKafkaAndThePipeline(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	closed := func() string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		_ = ln.Close()
		return addr
	}

	t.Run("ready when everything answers", func(t *testing.T) {
		h := health.NewRegistry()
		testenv.Run(t, e.service(t, Options{Health: h}))
		if rep := h.Ready(context.Background()); !rep.Ready || rep.Checks["clickhouse"] != "ok" || rep.Checks["kafka"] != "ok" || rep.Checks["ingest"] != "ok" {
			t.Fatalf("report %+v, want ready with clickhouse, kafka and ingest ok", rep)
		}
	})
	t.Run("not ready when Kafka is unreachable", func(t *testing.T) {
		h := health.NewRegistry()
		o := Options{Kafka: e.kafka, ClickHouse: e.conn, Database: e.db, Health: h, Log: quiet}
		o.Kafka.Brokers = []string{closed()}
		if _, err := New(o); err != nil {
			t.Fatal(err)
		}
		if rep := h.Ready(context.Background()); rep.Ready || rep.Checks["kafka"] == "ok" {
			t.Fatalf("report %+v, want kafka failing", rep)
		}
	})
	t.Run("not ready while batches cannot be written", func(t *testing.T) {
		h := health.NewRegistry()
		o := Options{Kafka: e.kafka, ClickHouse: e.conn, Database: "no_such_database", Health: h, Log: quiet, BatchInterval: 50 * time.Millisecond}
		s, err := New(o)
		if err != nil {
			t.Fatal(err)
		}
		testenv.Run(t, s)
		d := newDataset(6, 1)
		e.produce(t, kafka.TopicClicks, d.clickMessages()[:1])
		waitFor(t, 20*time.Second, "the ingest check failing", func() bool { return !h.Ready(context.Background()).Ready })
		if rep := h.Ready(context.Background()); !strings.Contains(rep.Checks["ingest"], "clickhouse") || rep.Checks["clickhouse"] != "ok" {
			t.Fatalf("report %+v, want the ingest check naming the failing ClickHouse write", rep)
		}
	})
}

func TestLagFollowsTheLastBatchOfEachPartition(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	l := newLagTracker("test.lag", func() time.Time { return now })
	l.observe(0, 9, 20, now.Add(-5*time.Second))   // 10 messages behind, 5 s old
	l.observe(1, 41, 42, now.Add(-time.Minute))    // caught up: no delay whatever the age
	l.observe(2, 99, 103, now.Add(-2*time.Second)) // 3 behind
	if m, s := l.publish(); m != 13 || s != 5 {
		t.Fatalf("lag = %d messages, %v s; want 13 and 5", m, s)
	}
	now = now.Add(2 * time.Minute)
	l.observe(1, 50, 51, now)
	if m, s := l.publish(); m != 0 || s != 0 {
		t.Fatalf("after the other partitions moved away: %d messages, %v s; want 0 and 0", m, s)
	}
}

func TestNewRejectsIncompleteOptions(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	valid := Options{Kafka: e.kafka, ClickHouse: e.conn, Database: e.db}
	tests := []struct {
		name string
		edit func(*Options)
	}{
		{"no ClickHouse connection", func(o *Options) { o.ClickHouse = nil }},
		{"no database", func(o *Options) { o.Database = "" }},
		{"no Kafka brokers", func(o *Options) { o.Kafka.Brokers = nil }},
		{"a negative batch size", func(o *Options) { o.BatchSize = -1 }},
		{"a negative interval", func(o *Options) { o.BatchInterval = -time.Second }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := valid
			tt.edit(&o)
			if _, err := New(o); err == nil {
				t.Fatal("New accepted it")
			}
		})
	}
	if _, err := New(valid); err != nil {
		t.Fatalf("New(valid) = %v", err)
	}
}
