package ingest

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/partnerstream/partnerstream/internal/kafka"
	"github.com/partnerstream/partnerstream/internal/store/chstore"
	"github.com/partnerstream/partnerstream/internal/testenv"
)

// The ingester under test runs in a child process (this test binary, re-executed) so that it
// can be SIGKILLed: no deferred function, no flush, no commit, no leaving the group.
const (
	envChild           = "PARTNERSTREAM_INGEST_TEST_CHILD"
	envChildBrokers    = "PARTNERSTREAM_INGEST_TEST_BROKERS"
	envChildClickHouse = "PARTNERSTREAM_INGEST_TEST_CLICKHOUSE"
	envChildDatabase   = "PARTNERSTREAM_INGEST_TEST_DATABASE"
	envChildBatch      = "PARTNERSTREAM_INGEST_TEST_BATCH"
	// envChildCrashAfter makes the child kill itself right after its Nth batch is stored and
	// before its offsets are committed: the worst moment for double counting.
	envChildCrashAfter = "PARTNERSTREAM_INGEST_TEST_CRASH_AFTER"
)

func runChild() int {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conn, err := chstore.Open(ctx, chstore.Config{Addr: os.Getenv(envChildClickHouse), Database: os.Getenv(envChildDatabase)})
	if err != nil {
		os.Stderr.WriteString(err.Error() + "\n")
		return 2
	}
	batch, _ := strconv.Atoi(os.Getenv(envChildBatch))
	s, err := New(Options{
		Kafka:      kafka.Config{Brokers: strings.Split(os.Getenv(envChildBrokers), ","), Partitions: 6, ReplicationFactor: 1, Retention: time.Hour},
		ClickHouse: conn, Database: os.Getenv(envChildDatabase), BatchSize: batch, BatchInterval: 200 * time.Millisecond,
	})
	if err != nil {
		os.Stderr.WriteString(err.Error() + "\n")
		return 2
	}
	if n, _ := strconv.Atoi(os.Getenv(envChildCrashAfter)); n > 0 {
		var writes atomic.Int64
		s.afterWrite = func(string, int) {
			if writes.Add(1) == int64(n) {
				self, _ := os.FindProcess(os.Getpid())
				_ = self.Kill()
				select {}
			}
		}
	}
	if err := s.Run(ctx); err != nil {
		os.Stderr.WriteString(err.Error() + "\n")
		return 1
	}
	return 0
}

type child struct {
	cmd    *exec.Cmd
	output bytes.Buffer
	exited chan struct{}
}

func (e *env) startChild(t *testing.T, batch, crashAfter int) *child {
	t.Helper()
	c := &child{cmd: exec.Command(os.Args[0], "-test.run=^$"), exited: make(chan struct{})}
	c.cmd.Env = append(os.Environ(), envChild+"=1",
		envChildBrokers+"="+strings.Join(e.kafka.Brokers, ","), envChildClickHouse+"="+e.addr, envChildDatabase+"="+e.db,
		envChildBatch+"="+strconv.Itoa(batch), envChildCrashAfter+"="+strconv.Itoa(crashAfter))
	c.cmd.Stdout, c.cmd.Stderr = &c.output, &c.output
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = c.cmd.Wait(); close(c.exited) }()
	t.Cleanup(func() { _ = c.cmd.Process.Kill(); <-c.exited })
	return c
}

// outputAfterKill stops the child and returns what it printed, read only once it has exited:
// the child writes to the buffer until then.
func (c *child) outputAfterKill() string {
	_ = c.cmd.Process.Kill()
	<-c.exited
	return c.output.String()
}

// waitKilled waits for the child to die of SIGKILL.
func (c *child) waitKilled(t *testing.T, timeout time.Duration) {
	t.Helper()
	select {
	case <-c.exited:
	case <-time.After(timeout):
		t.Fatalf("the ingester did not crash within %s; output:\n%s", timeout, c.outputAfterKill())
	}
	if got := c.cmd.ProcessState.String(); got != "signal: killed" {
		t.Fatalf("the ingester ended with %q, want it killed; output:\n%s", got, c.output.String())
	}
}

// killWhen SIGKILLs the child as soon as cond holds: mid-stream, wherever it is.
func (c *child) killWhen(t *testing.T, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("the ingester made no progress within %s; output:\n%s", timeout, c.outputAfterKill())
		}
		time.Sleep(5 * time.Millisecond)
	}
	_ = c.cmd.Process.Kill()
	c.waitKilled(t, 10*time.Second)
}

// crashTwice kills two ingesters mid-stream: the first right after it stored a batch and before
// it committed it, the second from outside once progress() has moved by minProgress. Then a
// third ingester finishes the topic. The first runs alone until it dies, so it holds every
// partition and its crash cannot depend on which partitions a rebalance gave it (started side
// by side, the other one could drain the topic first and leave it nothing to write). The group
// waits out each dead member's session (30 s) before the next one gets the partitions.
func (e *env) crashTwice(t *testing.T, topic string, batch, crashAfter int, progress func() uint64, minProgress uint64) {
	t.Helper()
	e.startChild(t, batch, crashAfter).waitKilled(t, 90*time.Second) // generous: a loaded 2-core machine
	before := progress()
	e.startChild(t, batch, 0).killWhen(t, 2*time.Minute, func() bool { return progress() >= before+minProgress })
	group := DefaultGroupPrefix + "-clicks"
	if topic == kafka.TopicEvents {
		group = DefaultGroupPrefix + "-events"
	}
	stop := testenv.Run(t, e.service(t, Options{BatchSize: 1000, BatchInterval: 100 * time.Millisecond}))
	e.waitCaughtUp(t, group, topic, 2*time.Minute)
	stop()
}

// replayTwice produces the topics again and replays them from the start in a new consumer
// group, then checks the figures have not moved.
func (e *env) replayTwice(t *testing.T, d dataset, rows map[string]string) {
	t.Helper()
	before := map[string]uint64{}
	for table, q := range rows {
		before[table] = e.count(t, q)
	}
	check := func(t *testing.T) {
		assertFigures(t, e.conn, e.db, d)
		for table, q := range rows {
			if got := e.count(t, q); got != before[table] {
				t.Errorf("%s went from %d to %d rows", table, before[table], got)
			}
		}
	}
	t.Run("a topic produced again changes nothing", func(t *testing.T) {
		e.produce(t, kafka.TopicClicks, d.clickMessages())
		e.produce(t, kafka.TopicEvents, d.eventMessages())
		stop := testenv.Run(t, e.service(t, Options{}))
		e.waitCaughtUp(t, DefaultGroupPrefix+"-clicks", kafka.TopicClicks, time.Minute)
		e.waitCaughtUp(t, DefaultGroupPrefix+"-events", kafka.TopicEvents, time.Minute)
		stop()
		check(t)
	})
	t.Run("a consumer group replaying from the start changes nothing", func(t *testing.T) {
		stop := testenv.Run(t, e.service(t, Options{GroupPrefix: "replay"}))
		e.waitCaughtUp(t, "replay-clicks", kafka.TopicClicks, time.Minute)
		e.waitCaughtUp(t, "replay-events", kafka.TopicEvents, time.Minute)
		stop()
		check(t)
	})
}

func TestClickFiguresStayExactThroughKilledIngestersAndReplays(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	d := newDataset(1, 12000)
	d.events = nil
	e.produce(t, kafka.TopicClicks, d.clickMessages())
	rawClicks := func() uint64 { return e.count(t, "SELECT count() FROM "+e.db+".clicks") }
	e.crashTwice(t, kafka.TopicClicks, 500, 3, rawClicks, 2500)
	// clicks is a ReplacingMergeTree, whose merges may hide a duplicate here; the rollups
	// compared below cannot.
	if got, want := rawClicks(), uint64(d.distinctClicks()); got != want {
		t.Errorf("clicks holds %d rows, want %d: one per click id", got, want)
	}
	assertFigures(t, e.conn, e.db, d)
	e.replayTwice(t, d, map[string]string{"clicks": "SELECT count() FROM " + e.db + ".clicks"})
}

func TestConversionFiguresStayExactThroughKilledIngestersAndReplays(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	d := newDataset(2, 12000)
	// Clicks first, as in production (a conversion is attributed to a stored click): the
	// conversions take their link and sub1 from it.
	e.produce(t, kafka.TopicClicks, d.clickMessages())
	stop := testenv.Run(t, e.service(t, Options{}))
	e.waitCaughtUp(t, DefaultGroupPrefix+"-clicks", kafka.TopicClicks, time.Minute)
	stop()

	e.produce(t, kafka.TopicEvents, d.eventMessages())
	changes := func() uint64 { return e.count(t, "SELECT count() FROM "+e.db+".conversion_changes") }
	e.crashTwice(t, kafka.TopicEvents, 40, 2, changes, 150)
	assertFigures(t, e.conn, e.db, d)
	e.replayTwice(t, d, map[string]string{"conversion_changes": "SELECT count() FROM " + e.db + ".conversion_changes"})
}
