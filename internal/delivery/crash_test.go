package delivery

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/partnerstream/partnerstream/internal/events"
	"github.com/partnerstream/partnerstream/internal/kafka"
	"github.com/partnerstream/partnerstream/internal/store/pgstore"
	"github.com/partnerstream/partnerstream/internal/testenv"
	"github.com/partnerstream/partnerstream/internal/webhooks/signing"
)

// The deliver component under test runs in a child process (this test binary, re-executed)
// so that it can be SIGKILLed: no deferred function, no recording, no commit.
const (
	envChild        = "PARTNERSTREAM_DELIVER_TEST_CHILD"
	envChildDB      = "PARTNERSTREAM_DELIVER_TEST_DB"
	envChildBrokers = "PARTNERSTREAM_DELIVER_TEST_BROKERS"
	envChildTargets = "PARTNERSTREAM_DELIVER_TEST_TARGETS"
	// envChildCrashAfter makes the child kill itself right after its Nth attempt (before it
	// is recorded, while other attempts are in flight) or, with envChildCrashOnRecord, right
	// after it stored its Nth batch of events (before it committed their offsets).
	envChildCrashAfter    = "PARTNERSTREAM_DELIVER_TEST_CRASH_AFTER"
	envChildCrashOnRecord = "PARTNERSTREAM_DELIVER_TEST_CRASH_ON_RECORD"
)

// fixedTarget is a subscription handed to the child.
type fixedTarget struct {
	Company, ID, URL, Secret string
}

func (f fixedTarget) target() signing.Target {
	key, _ := signing.Key(f.Secret)
	return signing.Target{ID: f.ID, URL: f.URL, Secrets: []signing.HMACKey{{Key: key}}}
}

// fastRetries shortens the lease and the attempt timeout so that a crash test does not wait
// out the production values.
func fastRetries(s *Service) {
	s.sender.timeout = time.Second
	s.o.Lease = 3 * time.Second
}

func runChild() int {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	db, err := pgstore.Open(ctx, os.Getenv(envChildDB))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	var targets []fixedTarget
	if err := json.Unmarshal([]byte(os.Getenv(envChildTargets)), &targets); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	sub := newSubs()
	for _, f := range targets {
		sub.put(f.Company, f.target(), events.ConversionCreated)
	}
	s, err := New(Options{DB: db, Kafka: testKafka(strings.Split(os.Getenv(envChildBrokers), ",")), Subscriptions: sub,
		AllowList: loopback, Workers: 16, ConsumeBatch: 50, ClaimBatch: 32, PollInterval: 50 * time.Millisecond})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	fastRetries(s)
	crashAfter, _ := strconv.Atoi(os.Getenv(envChildCrashAfter))
	var count atomic.Int64
	crash := func() {
		if count.Add(1) == int64(crashAfter) {
			self, _ := os.FindProcess(os.Getpid())
			_ = self.Kill()
			select {}
		}
	}
	if os.Getenv(envChildCrashOnRecord) != "" {
		s.afterRecord = func(int) { crash() }
	} else {
		s.afterAttempt = func(outcome) { crash() }
	}
	if err := s.Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

func testKafka(brokers []string) kafka.Config {
	return kafka.Config{Brokers: brokers, Partitions: 4, ReplicationFactor: 1, Retention: time.Hour, ClientID: "deliver-test"}
}

// newKafka starts a broker with the events topic.
func newKafka(t testing.TB) kafka.Config {
	t.Helper()
	cfg := testKafka(testenvKafka(t))
	if err := kafka.EnsureTopics(context.Background(), cfg, kafka.TopicEvents); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// produce writes the events to partnerstream.events, keyed by event id.
func produce(t testing.TB, cfg kafka.Config, envs ...events.Envelope) {
	t.Helper()
	w := kafka.NewProducer(cfg, kafka.TopicEvents, kafka.ProducerOptions{})
	defer w.Close()
	msgs := make([]kafka.Record, len(envs))
	for i, e := range envs {
		b, _ := json.Marshal(e)
		msgs[i] = kafka.Record{Key: []byte(e.ID), Value: b}
	}
	for len(msgs) > 0 {
		n := min(len(msgs), 5000)
		if err := kafka.FirstError(w.Produce(context.Background(), msgs[:n])); err != nil {
			t.Fatalf("produce: %v", err)
		}
		msgs = msgs[n:]
	}
}

func TestAKilledWorkerLosesNoDelivery(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name     string
		onRecord bool
		after    int
	}{
		{"killed after its 300th attempt, before recording it", false, 300},
		{"killed after storing its 3rd batch of events, before committing it", true, 3},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			killedWorker(t, tt.onRecord, tt.after)
		})
	}
}

func killedWorker(t *testing.T, onRecord bool, after int) {
	url, db := migratedWithURL(t)
	cos := addCompanies(t, db, 20)
	cfg := newKafka(t)
	rc := newReceiver(t, func(w http.ResponseWriter, _ *http.Request) {
		time.Sleep(2 * time.Millisecond) // so that attempts overlap the kill
		w.WriteHeader(http.StatusNoContent)
	})
	var targets []fixedTarget
	secrets := map[string]string{} // by company
	for _, co := range cos {
		f := fixedTarget{Company: co, ID: "wh_" + co[3:], URL: rc.URL + "/" + co, Secret: signing.NewSecret()}
		targets = append(targets, f)
		secrets[co] = f.Secret
	}
	const nEvents = 400
	var envs []events.Envelope
	for i := range nEvents {
		envs = append(envs, envelope(events.ConversionCreated, cos[i%10], cos[10+i%10]))
	}
	produce(t, cfg, envs...)

	tj, _ := json.Marshal(targets)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	var output bytes.Buffer
	cmd.Stdout, cmd.Stderr = &output, &output
	cmd.Env = append(os.Environ(), envChild+"=1", envChildDB+"="+url, envChildBrokers+"="+strings.Join(cfg.Brokers, ","),
		envChildTargets+"="+string(tj), envChildCrashAfter+"="+strconv.Itoa(after))
	if onRecord {
		cmd.Env = append(cmd.Env, envChildCrashOnRecord+"=1")
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-exited })
	select {
	case <-exited:
	case <-time.After(time.Minute):
		t.Fatalf("the worker did not crash; output:\n%s", output.String())
	}
	if got := cmd.ProcessState.String(); got != "signal: killed" {
		t.Fatalf("the worker ended with %q, want it killed; output:\n%s", got, output.String())
	}
	before := rows(t, db, "WHERE status = 'succeeded'")
	t.Logf("killed: %d deliveries recorded as succeeded, %d requests received", len(before), len(rc.requests()))

	// A new worker in the same consumer group finishes: the killed one's uncommitted events
	// are consumed again, its claimed deliveries come back when their lease ends.
	sub := newSubs()
	for _, f := range targets {
		sub.put(f.Company, f.target(), events.ConversionCreated)
	}
	s := newService(t, db, Options{Kafka: cfg, Subscriptions: sub, PollInterval: 50 * time.Millisecond})
	fastRetries(s)
	stop := testenv.Run(t, s)
	eventually(t, 2*time.Minute, func() error {
		if n := len(rows(t, db, "WHERE status = 'succeeded'")); n != 2*nEvents {
			return fmt.Errorf("%d deliveries succeeded, want %d", n, 2*nEvents)
		}
		return nil
	})
	stop()

	all := rows(t, db, "")
	if len(all) != 2*nEvents {
		t.Fatalf("%d deliveries recorded, want one per event and company: %d", len(all), 2*nEvents)
	}
	seen := map[string]bool{}
	for _, r := range all {
		seen[r.eventID+" "+r.company] = true
	}
	for _, e := range envs {
		if !seen[e.ID+" "+e.AdvertiserID] || !seen[e.ID+" "+e.AffiliateID] {
			t.Fatalf("event %s lacks a delivery", e.ID)
		}
	}
	received := map[string]int{}
	for _, r := range rc.requests() {
		received[r.header.Get("webhook-id")]++
	}
	resent := 0
	for _, r := range all {
		if received[r.id] == 0 {
			t.Errorf("delivery %s was recorded as succeeded but never received", r.id)
		}
		resent += received[r.id] - 1
	}
	for _, r := range rc.requests() {
		ok := false
		for _, secret := range secrets {
			if verify(t, r, secret, true) == nil {
				ok = true
				break
			}
		}
		if !ok {
			t.Fatalf("request %s does not verify with any secret", r.header.Get("webhook-id"))
		}
	}
	t.Logf("%d deliveries were sent again after the crash (sent by the killed worker, not recorded)", resent)
}
