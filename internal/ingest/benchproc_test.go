package ingest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/partnerstream/partnerstream/internal/enrich"
	"github.com/partnerstream/partnerstream/internal/kafka"
	"github.com/partnerstream/partnerstream/internal/procstat"
	"github.com/partnerstream/partnerstream/internal/store/chstore"
)

// The benchmarks run the ingester in a process of its own (this test binary, re-executed), so
// that its CPU time is ingest's alone: the embedded broker, the producers and the polling stay
// in the benchmark's process.
const envBenchChild = "PARTNERSTREAM_INGEST_BENCH_CHILD"

// envBenchProfile names a file: each benchmark ingester writes its CPU profile there (the
// last one wins), for `go tool pprof`; envBenchMemProfile the same for its heap profile, written
// as it stops (alloc_space: what it allocated; inuse_space: what it keeps between batches).
const (
	envBenchProfile    = "INGEST_BENCH_CPUPROFILE"
	envBenchMemProfile = "INGEST_BENCH_MEMPROFILE"
)

// benchFetchOptions are the fetch settings of the benchmarks' ingesters, from
// INGEST_BENCH_FETCH_MIN_BYTES and INGEST_BENCH_FETCH_MAX_WAIT when set (to compare
// settings), else the defaults.
func benchFetchOptions(b *testing.B) Options {
	var o Options
	if v := os.Getenv("INGEST_BENCH_FETCH_MIN_BYTES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			b.Fatal(err)
		}
		o.FetchMinBytes = n
	}
	if v := os.Getenv("INGEST_BENCH_FETCH_MAX_WAIT"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			b.Fatal(err)
		}
		o.FetchMaxWait = d
	}
	return o
}

// benchChild is what the benchmark ingester is told, as JSON in envBenchChild.
type benchChild struct {
	Brokers       []string
	ClickHouse    string
	Database      string
	Profile       string
	FetchMinBytes int
	FetchMaxWait  time.Duration
	Enrich        enrich.Options
	// NoEnrich runs ingest without enrichment, to measure what enrichment costs.
	NoEnrich   bool
	MemProfile string
}

// benchMemory is what a benchmark ingester reports of its memory as it stops: peaks sampled
// every memSampleInterval while it ran, and what it holds at the end.
type benchMemory struct {
	PeakRSS     uint64 // VmHWM
	PeakRSSAnon uint64 // anonymous pages: the Go heap, stacks, the runtime's own
	PeakRSSFile uint64 // pages of mapped files: the binary, the databases
	MappedDBs   uint64 // at the end: the resident pages of the .mmdb files
	// PeakHeap is the most the heap's objects took, live or not yet swept: what the garbage
	// collector's target (GOGC) lets the heap grow to.
	PeakHeap uint64
	// PeakLive is the most that survived a collection: what the target is a multiple of.
	PeakLive uint64
	// Allocated is how many bytes the ingester allocated from its first message on.
	Allocated uint64
	// Kept is the heap after a last collection at the end: what stays between batches (caches,
	// the user-agent parser, buffers kept for reuse).
	Kept uint64
}

const memSampleInterval = 10 * time.Millisecond

// memorySampler keeps the peaks of benchMemory until stop.
type memorySampler struct {
	m        benchMemory
	received atomic.Uint64 // allocations when the first message arrived
	done     chan struct{}
	stopped  chan struct{}
}

func startMemorySampler() *memorySampler {
	ms := &memorySampler{done: make(chan struct{}), stopped: make(chan struct{})}
	go func() {
		defer close(ms.stopped)
		t := time.NewTicker(memSampleInterval)
		defer t.Stop()
		samples := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/gc/heap/live:bytes"}}
		pid := os.Getpid()
		for {
			metrics.Read(samples)
			m := &ms.m
			m.PeakHeap = max(m.PeakHeap, samples[0].Value.Uint64())
			m.PeakLive = max(m.PeakLive, samples[1].Value.Uint64())
			m.PeakRSSAnon = max(m.PeakRSSAnon, procstat.RSSAnon(pid))
			m.PeakRSSFile = max(m.PeakRSSFile, procstat.RSSFile(pid))
			select {
			case <-ms.done:
				return
			case <-t.C:
			}
		}
	}()
	return ms
}

func allocatedBytes() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// markReceived notes the allocations so far, as the first message arrives.
func (ms *memorySampler) markReceived() { ms.received.Store(allocatedBytes()) }

// stop ends the sampling, and writes the heap profile to profile when it is not empty.
func (ms *memorySampler) stop(profile string) (benchMemory, error) {
	close(ms.done)
	<-ms.stopped
	m, pid := ms.m, os.Getpid()
	m.Allocated = allocatedBytes() - ms.received.Load()
	m.PeakRSS, m.MappedDBs = procstat.PeakRSS(pid), procstat.MappedRSS(pid, ".mmdb")
	runtime.GC()
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	m.Kept = s[0].Value.Uint64()
	if profile != "" {
		f, err := os.Create(profile)
		if err != nil {
			return m, err
		}
		defer f.Close()
		if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
			return m, err
		}
	}
	return m, nil
}

// runBenchChild runs ingest at its defaults, as `partnerstream ingest` does, until SIGTERM. It prints "received" once the
// first message is in a batch: the parent starts its clock and CPU accounting there; and
// "stored N" once N clicks in all are stored, i.e. queryable (ClickHouse answers an insert
// once its rows and its materialized views' are written), so that the parent need not poll
// ClickHouse, which would cost it as much CPU as a tenth of the insert.
func runBenchChild() int {
	var cfg benchChild
	if err := json.Unmarshal([]byte(os.Getenv(envBenchChild)), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	TuneGC()
	memory := startMemorySampler()
	// SIGTERM ends the run once the memory is measured: the pipeline is idle then, its caches
	// and kept buffers still in hand.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	terminated := make(chan os.Signal, 1)
	signal.Notify(terminated, syscall.SIGTERM)
	var measured benchMemory
	var measureErr error
	go func() {
		<-terminated
		measured, measureErr = memory.stop(cfg.MemProfile)
		cancel()
	}()
	conn, err := chstore.Open(ctx, chstore.Config{Addr: cfg.ClickHouse, Database: cfg.Database})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	o := Options{
		Kafka:      kafka.Config{Brokers: cfg.Brokers, Partitions: 6, ReplicationFactor: 1, Retention: time.Hour},
		ClickHouse: conn, Database: cfg.Database, FetchMinBytes: cfg.FetchMinBytes, FetchMaxWait: cfg.FetchMaxWait,
		noEnrich: cfg.NoEnrich,
	}
	if !cfg.NoEnrich {
		enr, err := enrich.New(cfg.Enrich)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		defer enr.Close()
		o.Enrich = enr
	}
	s, err := New(o)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	var stored int
	s.afterWrite = func(topic string, messages int) {
		if topic == kafka.TopicClicks {
			stored += messages
			fmt.Println("stored", stored)
		}
	}
	if cfg.Profile != "" {
		f, err := os.Create(cfg.Profile)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		defer pprof.StopCPUProfile()
	}
	go func() {
		for s.clicks.received.Load() == 0 {
			if ctx.Err() != nil {
				return
			}
			time.Sleep(time.Millisecond)
		}
		memory.markReceived()
		fmt.Println("received")
	}()
	if err := s.Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if measureErr != nil {
		fmt.Fprintln(os.Stderr, measureErr)
		return 1
	}
	report, _ := json.Marshal(measured)
	fmt.Println("memory", string(report))
	return 0
}

// benchIngester is a running benchmark ingester.
type benchIngester struct {
	cmd      *exec.Cmd
	received chan struct{}
	stored   atomic.Int64
	exited   chan struct{}
	mu       sync.Mutex
	output   bytes.Buffer
	memory   benchMemory // once stopped
}

func (e *env) startBenchIngester(b *testing.B) *benchIngester {
	b.Helper()
	return e.startBenchIngesterWith(b, benchChild{Enrich: benchEnrichOptions(b)})
}

// startBenchIngesterWith starts an ingester with cfg's enrichment, on e, with the benchmarks'
// fetch options and profiles.
func (e *env) startBenchIngesterWith(b *testing.B, cfg benchChild) *benchIngester {
	b.Helper()
	o := benchFetchOptions(b)
	cfg.Brokers, cfg.ClickHouse, cfg.Database = e.kafka.Brokers, e.addr, e.db
	cfg.Profile = os.Getenv(envBenchProfile)
	if cfg.MemProfile == "" {
		cfg.MemProfile = os.Getenv(envBenchMemProfile)
	}
	cfg.FetchMinBytes, cfg.FetchMaxWait = o.FetchMinBytes, o.FetchMaxWait
	child, _ := json.Marshal(cfg)
	i := &benchIngester{cmd: exec.Command(os.Args[0], "-test.run=^$", "-test.bench=^$"),
		received: make(chan struct{}), exited: make(chan struct{})}
	i.cmd.Env = append(os.Environ(), envBenchChild+"="+string(child))
	i.cmd.Stderr = &lockedWriter{i}
	stdout, err := i.cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := i.cmd.Start(); err != nil {
		b.Fatal(err)
	}
	go func() {
		lines := bufio.NewScanner(stdout)
		for lines.Scan() {
			if lines.Text() == "received" {
				close(i.received)
				continue
			}
			if n, ok := strings.CutPrefix(lines.Text(), "stored "); ok {
				stored, _ := strconv.ParseInt(n, 10, 64)
				i.stored.Store(stored)
				continue
			}
			if m, ok := strings.CutPrefix(lines.Text(), "memory "); ok {
				_ = json.Unmarshal([]byte(m), &i.memory) // read once exited is closed
				continue
			}
			_, _ = (&lockedWriter{i}).Write(append(lines.Bytes(), '\n'))
		}
		_ = i.cmd.Wait()
		close(i.exited)
	}()
	b.Cleanup(func() { _ = i.cmd.Process.Kill(); <-i.exited })
	return i
}

type lockedWriter struct{ i *benchIngester }

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.i.mu.Lock()
	defer w.i.mu.Unlock()
	return w.i.output.Write(p)
}

// waitReceived waits until the ingester has its first message.
func (i *benchIngester) waitReceived(b *testing.B) {
	b.Helper()
	select {
	case <-i.received:
	case <-i.exited:
		b.Fatalf("the ingester exited: %s", i.out())
	case <-time.After(2 * time.Minute):
		b.Fatalf("the ingester received nothing within 2m: %s", i.out())
	}
}

// waitStored waits until the ingester has stored n clicks.
func (i *benchIngester) waitStored(b *testing.B, n int) {
	b.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for i.stored.Load() < int64(n) {
		select {
		case <-i.exited:
			b.Fatalf("the ingester exited: %s", i.out())
		default:
		}
		if time.Now().After(deadline) {
			b.Fatalf("the ingester stored %d of %d clicks within 2m: %s", i.stored.Load(), n, i.out())
		}
		time.Sleep(time.Millisecond)
	}
}

func (i *benchIngester) out() string {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.output.String()
}

// cpu is the CPU time (user and system) the ingester has used so far, from /proc, in clock
// ticks of 10 ms.
func (i *benchIngester) cpu(b *testing.B) time.Duration {
	b.Helper()
	return procstat.CPU(i.cmd.Process.Pid)
}

// stop ends the ingester as SIGTERM does in production and waits for it to exit.
func (i *benchIngester) stop(b *testing.B) {
	b.Helper()
	_ = i.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-i.exited:
	case <-time.After(time.Minute):
		b.Fatalf("the ingester did not stop within 1m: %s", i.out())
	}
	if !i.cmd.ProcessState.Success() {
		b.Fatalf("the ingester ended with %s: %s", i.cmd.ProcessState, i.out())
	}
}

// perEvent is CPU time per event in µs.
func perEvent(cpu time.Duration, events int) float64 {
	return float64(cpu.Microseconds()) / float64(events)
}
