package tracking_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/partnerstream/partnerstream/internal/events"
	"github.com/partnerstream/partnerstream/internal/ids"
	"github.com/partnerstream/partnerstream/internal/metrics/metricstest"
	"github.com/partnerstream/partnerstream/internal/tracking"
	"github.com/partnerstream/partnerstream/internal/tracking/trackingtest"
)

// newClick returns a click with every field set.
func newClick(i int) events.Click {
	return events.Click{
		ClickID: ids.New(ids.Click), OccurredAt: time.Date(2026, 5, 1, 12, 0, i%60, 123_000_000, time.UTC),
		LinkID: ids.New(ids.Link), ProgramID: ids.New(ids.Program), AffiliateID: ids.New(ids.Company), AdvertiserID: ids.New(ids.Company),
		PromotionID: ids.New(ids.Promotion), Sub1: "s1", Sub2: "s2", Sub3: "s3", Sub4: "s4", Sub5: fmt.Sprint(i),
		IP: "203.0.113.7", UserAgent: "Mozilla/5.0 test", Referrer: "https://blog.example.test/post", Country: "ES",
		IsBot: i%2 == 0, IsDuplicate: i%3 == 0, LandingURL: "https://shop.example.test/?x=1",
	}
}

// sameClicks checks that every click on the topic is the one recorded under its id: the
// recorder reuses the buffers clicks are encoded into, and a buffer reused too early would
// put another click's bytes on Kafka.
func sameClicks(t *testing.T, got []trackingtest.Message, sent map[string]events.Click) {
	t.Helper()
	for _, m := range got {
		if want := sent[m.Click.ClickID]; m.Click != want {
			t.Fatalf("on Kafka:\n%+v\nrecorded:\n%+v", m.Click, want)
		}
	}
}

func newRecorder(t testing.TB, o tracking.RecorderOptions) *tracking.Recorder {
	t.Helper()
	if o.SpoolDir == "" {
		o.SpoolDir = t.TempDir()
	}
	if o.Log == nil {
		o.Log = quiet
	}
	r, err := tracking.NewRecorder(o)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestAckModePutsTheWholeClickOnKafkaKeyedByItsID(t *testing.T) {
	k := trackingtest.StartBroker(t)
	before := metricstest.Value(t, "partnerstream_clicks_recorded_total", "mode", "ack")
	// A generous timeout: this is about where the click goes, and the first send (dialing the
	// broker, reading its metadata) can exceed the default 50 ms on a loaded machine, which
	// would spool the click instead.
	r := newRecorder(t, tracking.RecorderOptions{Kafka: k.Config, AckTimeout: 10 * time.Second})
	trackingtest.RunRecorder(t, r)
	want := newClick(6)
	if err := r.Record(context.Background(), want); err != nil {
		t.Fatal(err)
	}
	// In ack mode the click is on Kafka when Record returns: no waiting.
	got := trackingtest.ReadClicksOnce(t, k.Config)
	trackingtest.ExactlyOnce(t, got, []string{want.ClickID})
	if got[0].Click != want {
		t.Fatalf("on Kafka:\n%+v\nsent:\n%+v", got[0].Click, want)
	}
	if after := metricstest.Value(t, "partnerstream_clicks_recorded_total", "mode", "ack"); after != before+1 {
		t.Fatalf("clicks_recorded_total{mode=ack} went from %v to %v", before, after)
	}
	if r.SpoolBytes() != 0 {
		t.Fatalf("spool holds %d bytes with Kafka up", r.SpoolBytes())
	}
}

func TestABrokerOutageLosesAndDuplicatesNoClick(t *testing.T) {
	for _, mode := range []tracking.Mode{tracking.ModeAck, tracking.ModeAsync} {
		t.Run(string(mode), func(t *testing.T) {
			k := trackingtest.StartBroker(t)
			r := newRecorder(t, tracking.RecorderOptions{Kafka: k.Config, Mode: mode, AckTimeout: 30 * time.Millisecond})
			trackingtest.RunRecorder(t, r)
			var want []string
			sent := map[string]events.Click{}
			var mu sync.Mutex
			record := func(n int) {
				var wg sync.WaitGroup
				for i := range n {
					wg.Go(func() {
						c := newClick(i)
						if err := r.Record(context.Background(), c); err != nil {
							t.Errorf("Record: %v", err)
							return
						}
						mu.Lock()
						want = append(want, c.ClickID)
						sent[c.ClickID] = c
						mu.Unlock()
					})
				}
				wg.Wait()
			}
			record(10) // the producer is connected and has the metadata
			if got := trackingtest.ReadClicks(t, k.Config, 10, 10*time.Second); len(got) != 10 {
				t.Fatalf("%d clicks before the outage, want 10", len(got))
			}
			k.Stop()
			start := time.Now()
			record(40)
			if took := time.Since(start); took > 5*time.Second {
				t.Fatalf("40 clicks during the outage took %s", took)
			}
			if mode == tracking.ModeAck && r.SpoolBytes() == 0 {
				t.Fatal("the spool is empty after clicks with the broker down")
			}
			k.Start()
			trackingtest.ReadClicks(t, k.Config, len(want), 30*time.Second)
			// Give a duplicate, if there were one, the time to show up.
			time.Sleep(2 * time.Second)
			got := trackingtest.ReadClicksOnce(t, k.Config)
			trackingtest.ExactlyOnce(t, got, want)
			sameClicks(t, got, sent)
			trackingtest.WaitForEmptySpool(t, r, 5*time.Second)
		})
	}
}

func TestAsyncModeFlushesItsQueueOnShutdown(t *testing.T) {
	k := trackingtest.StartBroker(t)
	r := newRecorder(t, tracking.RecorderOptions{Kafka: k.Config, Mode: tracking.ModeAsync})
	stop := trackingtest.RunRecorder(t, r)
	var want []string
	sent := map[string]events.Click{}
	for i := range 2000 {
		c := newClick(i)
		if err := r.Record(context.Background(), c); err != nil {
			t.Fatal(err)
		}
		want = append(want, c.ClickID)
		sent[c.ClickID] = c
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	// Run has returned: everything is on Kafka now, nothing left in memory.
	got := trackingtest.ReadClicksOnce(t, k.Config)
	trackingtest.ExactlyOnce(t, got, want)
	sameClicks(t, got, sent)
	if err := r.Record(context.Background(), newClick(0)); !errors.Is(err, tracking.ErrClosed) {
		t.Fatalf("Record after shutdown: %v, want ErrClosed", err)
	}
}

func TestAsyncModeSpoolsWhenItsQueueIsFull(t *testing.T) {
	k := trackingtest.StartBroker(t)
	spooled := metricstest.Value(t, "partnerstream_clicks_spooled_total", "", "")
	r := newRecorder(t, tracking.RecorderOptions{Kafka: k.Config, Mode: tracking.ModeAsync, QueueSize: 5})
	// Not running yet: nothing drains the queue, so clicks 6 to 20 must go to the spool.
	var want []string
	for i := range 20 {
		c := newClick(i)
		if err := r.Record(context.Background(), c); err != nil {
			t.Fatal(err)
		}
		want = append(want, c.ClickID)
	}
	if got := metricstest.Value(t, "partnerstream_clicks_spooled_total", "", "") - spooled; got != 15 {
		t.Fatalf("%v clicks spooled, want 15", got)
	}
	trackingtest.RunRecorder(t, r)
	trackingtest.ExactlyOnce(t, trackingtest.ReadClicks(t, k.Config, 20, 20*time.Second), want)
}

func TestAFullSpoolDropsClicksAndCountsThem(t *testing.T) {
	before := metricstest.Value(t, "partnerstream_clicks_dropped_total", "reason", "spool_full")
	r := newRecorder(t, tracking.RecorderOptions{Kafka: trackingtest.DeadBroker(t), SpoolMaxBytes: 2000, AckTimeout: 20 * time.Millisecond})
	var dropped int
	for i := range 10 { // about 600 bytes each: three fit
		if err := r.Record(context.Background(), newClick(i)); err != nil {
			if !errors.Is(err, tracking.ErrSpoolFull) {
				t.Fatalf("Record: %v, want ErrSpoolFull", err)
			}
			dropped++
		}
	}
	if dropped != 7 {
		t.Fatalf("%d clicks dropped, want 7 (spool %d bytes)", dropped, r.SpoolBytes())
	}
	if got := metricstest.Value(t, "partnerstream_clicks_dropped_total", "reason", "spool_full") - before; got != 7 {
		t.Fatalf("clicks_dropped_total{reason=spool_full} grew by %v, want 7", got)
	}
}

// childEnv names the spool directory of TestSpoolingChild.
const childEnv = "PARTNERSTREAM_TRACKING_SPOOL_CHILD"

// TestSpoolingChild is the process TestKill9WithAFullSpoolLosesNothing kills: it spools
// clicks with Kafka down, prints their ids, then waits to be killed.
func TestSpoolingChild(t *testing.T) {
	dir := os.Getenv(childEnv)
	if dir == "" {
		t.Skip("helper process of TestKill9WithASpoolLosesNothing")
	}
	r := newRecorder(t, tracking.RecorderOptions{Kafka: trackingtest.DeadBroker(t), SpoolDir: dir, AckTimeout: 20 * time.Millisecond})
	for i := range 30 {
		c := newClick(i)
		if err := r.Record(context.Background(), c); err != nil {
			fmt.Println("ERROR", err)
			return
		}
		fmt.Println("SPOOLED", c.ClickID)
	}
	fmt.Println("READY")
	time.Sleep(time.Minute)
}

func TestKill9WithASpoolLosesNothing(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestSpoolingChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), childEnv+"="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var want []string
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		line := sc.Text()
		if id, ok := strings.CutPrefix(line, "SPOOLED "); ok {
			want = append(want, id)
		}
		if line == "READY" || strings.HasPrefix(line, "ERROR") {
			break
		}
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if len(want) != 30 {
		t.Fatalf("the child spooled %d clicks, want 30", len(want))
	}
	segs, _ := filepath.Glob(filepath.Join(dir, "*.wal"))
	if len(segs) == 0 {
		t.Fatal("the killed process left no spool")
	}
	// A crash in the middle of a commit leaves half a record at the end: add one.
	f, err := os.OpenFile(segs[len(segs)-1], os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte{0, 0, 2, 0, 0xde, 0xad, 0xbe, 0xef, '{', '"'})
	f.Close()

	before := metricstest.Value(t, "partnerstream_clicks_dropped_total", "reason", "spool_corrupt")
	k := trackingtest.StartBroker(t)
	r := newRecorder(t, tracking.RecorderOptions{Kafka: k.Config, SpoolDir: dir})
	if r.SpoolBytes() == 0 {
		t.Fatal("the new recorder sees an empty spool")
	}
	trackingtest.RunRecorder(t, r)
	trackingtest.ExactlyOnce(t, trackingtest.ReadClicks(t, k.Config, len(want), 20*time.Second), want)
	trackingtest.WaitForEmptySpool(t, r, 5*time.Second)
	if got := metricstest.Value(t, "partnerstream_clicks_dropped_total", "reason", "spool_corrupt") - before; got != 1 {
		t.Fatalf("the torn record counted %v times as spool_corrupt, want 1", got)
	}
}
