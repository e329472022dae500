// Command bench-redirect measures the click redirect under load (`make bench-redirect`). In
// one process it serves, each on its own loopback port:
//
//   - bare:  a Fiber handler answering the same 302 (same Location and headers) with no work;
//   - async: the real redirect (httpapi server, link cache, bot and duplicate checks) with the
//     recorder in async mode;
//   - ack:   the same in ack mode (the 302 waits for Kafka's acknowledgement);
//
// against real Postgres and the embedded Kafka broker, then drives each with wrk on
// 127.0.0.1 at each connection count and prints requests per second and latency
// percentiles beside the bare handler's, with the targets of the tracking issue.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"math/rand/v2"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/partnerstream/partnerstream/internal/clickid"
	"github.com/partnerstream/partnerstream/internal/clientaddr"
	"github.com/partnerstream/partnerstream/internal/health"
	"github.com/partnerstream/partnerstream/internal/httpapi"
	"github.com/partnerstream/partnerstream/internal/identity"
	"github.com/partnerstream/partnerstream/internal/kafka"
	"github.com/partnerstream/partnerstream/internal/links"
	"github.com/partnerstream/partnerstream/internal/links/linkstest"
	"github.com/partnerstream/partnerstream/internal/procstat"
	"github.com/partnerstream/partnerstream/internal/store/pgstore"
	"github.com/partnerstream/partnerstream/internal/tracking"
)

func main() {
	var (
		pgURL    = flag.String("postgres-url", os.Getenv("PARTNERSTREAM_TEST_POSTGRES_URL"), "admin URL of a Postgres server; a scratch database is created and dropped")
		duration = flag.Duration("duration", 10*time.Second, "length of each wrk run")
		warmup   = flag.Duration("warmup", 2*time.Second, "unmeasured wrk run before each measured one")
		conns    = flag.String("connections", "64,256", "comma-separated connection counts")
		threads  = flag.Int("threads", 2, "wrk threads")
		wrkBin   = flag.String("wrk", "wrk", "wrk binary")
		spoolDir = flag.String("spool-dir", "", "parent of the recorders' spools (default: a temporary directory)")
		profile  = flag.String("cpuprofile", "", "write a CPU profile of each measured run into this directory")
		broker   = flag.Bool("broker", false, "internal: run the embedded Kafka broker and print its address")
		ackWait  = flag.Duration("ack-timeout", 0, "the recorders' AckTimeout (0: the default)")
		mw       = flag.Bool("middleware", false, "also measure the bare 302 behind the api server's middleware")
		modes    = flag.String("modes", "async,ack", "comma-separated recorder modes to measure beside the bare handler")
		xff      = flag.String("forwarded-for", "", "X-Forwarded-For of every request, the servers trusting wrk's 127.0.0.1 as a proxy (default: wrk is the client and no proxy is trusted)")
	)
	flag.Parse()
	if *broker {
		serveBroker()
		return
	}
	if *pgURL == "" {
		log.Fatal("bench-redirect: set -postgres-url or PARTNERSTREAM_TEST_POSTGRES_URL")
	}
	if _, err := exec.LookPath(*wrkBin); err != nil {
		log.Fatalf("bench-redirect: %s not found (hack/deps.sh installs wrk): %v", *wrkBin, err)
	}
	var counts []int
	for _, s := range strings.Split(*conns, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			log.Fatalf("bench-redirect: bad connection count %q", s)
		}
		counts = append(counts, n)
	}
	profileDir, ackTimeout, withMiddleware, forwardedFor = *profile, *ackWait, *mw, *xff
	for _, s := range strings.Split(*modes, ",") {
		m, err := tracking.ParseMode(strings.TrimSpace(s))
		if err != nil {
			log.Fatalf("bench-redirect: -modes: %v", err)
		}
		recorderModes = append(recorderModes, m)
	}
	keys, err := clickid.ParseKeys(clickid.GenerateKeySpec())
	if err != nil {
		log.Fatal(err)
	}
	clickIDs = keys
	if err := run(*pgURL, *spoolDir, counts, *threads, *duration, *warmup, *wrkBin); err != nil {
		log.Fatal(err)
	}
}

// fatal lets the linkstest helpers stop the program.
type fatal struct{}

func (fatal) Helper() {}

func (fatal) Fatalf(format string, args ...any) { log.Fatalf(format, args...) }

type target struct {
	name string
	url  string
	mode tracking.Mode // "" for the bare handler
}

func run(adminURL, spoolParent string, counts []int, threads int, duration, warmup time.Duration, wrkBin string) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	quiet := slog.New(slog.DiscardHandler)

	dbURL, drop, err := scratchDatabase(ctx, adminURL)
	if err != nil {
		return err
	}
	defer drop()
	if err := pgstore.Migrate(ctx, dbURL, quiet); err != nil {
		return err
	}
	db, err := pgstore.Open(ctx, dbURL)
	if err != nil {
		return err
	}
	defer db.Close()

	brokerAddr, brokerPID, stopBroker, err := startBroker()
	if err != nil {
		return err
	}
	defer stopBroker()
	kcfg := kafka.Config{Brokers: []string{brokerAddr}, Partitions: 6, ReplicationFactor: 1, Retention: time.Hour}
	if err := kafka.EnsureTopics(ctx, kcfg, kafka.TopicClicks); err != nil {
		return err
	}

	adv, aff := linkstest.Company(fatal{}, db, identity.Advertiser), linkstest.Company(fatal{}, db, identity.Affiliate)
	program := linkstest.Program(fatal{}, db, adv, "https://shop.example.com/landing?utm_source=affiliate", "")
	linkstest.Partnership(fatal{}, db, program, aff, "approved")
	linkSvc := links.NewService(db, links.Options{BaseURL: "http://127.0.0.1"})
	link, err := linkSvc.Create(ctx, aff, identity.Affiliate, links.NewLink{ProgramID: program, Subs: [5]string{"bench"}})
	if err != nil {
		return err
	}
	path := "/c/" + link.Code + "?sub2=wrk"

	if spoolParent == "" {
		if spoolParent, err = os.MkdirTemp("", "bench-redirect-"); err != nil {
			return err
		}
		defer os.RemoveAll(spoolParent)
	}

	var targets []target
	bareAddr, err := serveBare(ctx)
	if err != nil {
		return err
	}
	targets = append(targets, target{name: "bare", url: "http://" + bareAddr + path})
	if withMiddleware {
		mwAddr, err := serveMiddleware(ctx, quiet)
		if err != nil {
			return err
		}
		targets = append(targets, target{name: "middleware", url: "http://" + mwAddr + path})
	}
	recorders := map[tracking.Mode]*tracking.Recorder{}
	for _, mode := range recorderModes {
		rec, err := tracking.NewRecorder(tracking.RecorderOptions{Kafka: kcfg, Mode: mode, SpoolDir: spoolParent + "/" + string(mode),
			AckTimeout: ackTimeout, Log: quiet})
		if err != nil {
			return err
		}
		recorders[mode] = rec
		done := make(chan error, 1)
		rctx, stop := context.WithCancel(context.Background())
		go func() { done <- rec.Run(rctx) }()
		defer func() { stop(); <-done }()

		var proxies clientaddr.Trusted
		if forwardedFor != "" {
			proxies, _ = clientaddr.Parse([]string{"127.0.0.1"})
		}
		srv := httpapi.New(httpapi.Options{Addr: "127.0.0.1:0", Log: quiet, Health: health.NewRegistry(), TrustedProxies: proxies})
		resolver := tracking.NewResolver(linkSvc, tracking.ResolverOptions{})
		srv.MountTracking(linkSvc, tracking.NewService(resolver, rec, tracking.ServiceOptions{ClickIDs: clickIDs}), httpapi.TrackingOptions{})
		go func() { _ = srv.Run(ctx) }()
		addr, err := srv.Addr(ctx)
		if err != nil {
			return err
		}
		targets = append(targets, target{name: string(mode), url: "http://" + addr + path, mode: mode})
	}

	load, _ := os.ReadFile("/proc/loadavg")
	fmt.Printf("bench-redirect: GOMAXPROCS=%d, %d CPUs, load average %s, wrk -t%d, %s per run after a %s warm-up; Kafka: embedded (own process), %d partitions, acks=all; click ids signed (clickid, one key)\n",
		runtime.GOMAXPROCS(0), runtime.NumCPU(), strings.Join(strings.Fields(string(load))[:3], " "), threads, duration, warmup, kcfg.Partitions)
	if forwardedFor != "" {
		fmt.Printf("bench-redirect: every request carries X-Forwarded-For: %s, from 127.0.0.1 as a trusted proxy\n", forwardedFor)
	}
	results := map[string]map[int]wrkResult{}
	for _, n := range counts {
		for _, tg := range targets {
			if warmup > 0 {
				if _, err := runWrk(wrkBin, tg.url, threads, n, warmup); err != nil {
					return err
				}
			}
			before, produced := clickCounters(tg.mode), produceLatency()
			cpu0, brokerCPU0 := procstat.Self(), procstat.CPU(brokerPID)
			stopProfile := startProfile(fmt.Sprintf("%s-%d", tg.name, n))
			r, err := runWrk(wrkBin, tg.url, threads, n, duration)
			stopProfile()
			if err != nil {
				return err
			}
			r.serverCPU, r.brokerCPU = procstat.Self()-cpu0, procstat.CPU(brokerPID)-brokerCPU0
			r.clicks = clickCounters(tg.mode).minus(before)
			r.produce = produceLatency().minus(produced)
			if results[tg.name] == nil {
				results[tg.name] = map[int]wrkResult{}
			}
			results[tg.name][n] = r
			fmt.Fprintf(os.Stderr, "  %-10s c=%-4d %9.0f req/s  p50 %-8s p99 %-8s errors %d\n", tg.name, n, r.rps, r.p50, r.p99, r.errors)
			settle(tg.mode)
		}
	}
	printTable(targets, counts, results)
	for mode, rec := range recorders {
		if n := rec.SpoolBytes(); n > 0 {
			fmt.Printf("note: the %s recorder's spool holds %d bytes at the end\n", mode, n)
		}
	}
	return nil
}

var (
	profileDir     string
	ackTimeout     time.Duration
	withMiddleware bool
	forwardedFor   string
	recorderModes  []tracking.Mode
	// clickIDs sign the real redirect's click ids, as production does.
	clickIDs clickid.Keys
)

// startProfile profiles the CPU until the returned function is called, when -cpuprofile
// names a directory.
func startProfile(name string) func() {
	if profileDir == "" {
		return func() {}
	}
	f, err := os.Create(filepath.Join(profileDir, name+".pprof"))
	if err != nil {
		log.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		log.Fatal(err)
	}
	return func() { pprof.StopCPUProfile(); f.Close() }
}

// settle waits until a recorder has produced the clicks of the run (its counters stop
// moving), so its tail does not load the next run.
func settle(mode tracking.Mode) {
	if mode == "" {
		return
	}
	last := clickCounters(mode)
	for range 50 {
		time.Sleep(200 * time.Millisecond)
		now := clickCounters(mode)
		if now == last {
			return
		}
		last = now
	}
}

// scratchDatabase creates an empty database on the server of adminURL and returns its URL
// and a function that drops it.
func scratchDatabase(ctx context.Context, adminURL string) (string, func(), error) {
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return "", nil, fmt.Errorf("connect to postgres: %w", err)
	}
	name := fmt.Sprintf("bench_redirect_%d", rand.Uint32())
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		conn.Close(ctx)
		return "", nil, err
	}
	drop := func() {
		dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = conn.Exec(dctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
		conn.Close(dctx)
	}
	u, err := url.Parse(adminURL)
	if err != nil {
		drop()
		return "", nil, err
	}
	u.Path = "/" + name
	return u.String(), drop, nil
}
