package httpapi_test

import (
	"context"
	"net/http"
	"sort"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/partnerstream/partnerstream/internal/httpapi"
	"github.com/partnerstream/partnerstream/internal/ratelimit"
)

// BenchmarkAPIKeyAuthOverhead measures what API-key authentication adds to a request, over
// real HTTP on loopback: the same no-op handler is served behind the /api/v1 family (key
// checked, rate limit counted in Postgres as the api does) and outside it (the baseline),
// requests alternate between them, and the difference of the latency percentiles is
// reported.
func BenchmarkAPIKeyAuthOverhead(b *testing.B) {
	var opts httpapi.Options
	f := newFixture(b, func(o *httpapi.Options) { opts = *o })
	opts.Limits = ratelimit.NewPostgres(f.db)
	opts.RateLimit = httpapi.RateLimit{Requests: 1 << 30, Window: time.Minute}
	f.srv = httpapi.New(opts)
	noop := func(c *fiber.Ctx) error { return c.SendStatus(fiber.StatusNoContent) }
	f.srv.App().Get("/api/v1/bench-noop", noop)
	f.srv.App().Get("/bench-noop", noop)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = f.srv.Run(ctx) }()
	go f.srv.RunLimits(ctx)
	addr, err := f.srv.Addr(ctx)
	if err != nil {
		b.Fatal(err)
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
	get := func(path string, key string) time.Duration {
		req, _ := http.NewRequest("GET", "http://"+addr+path, nil)
		if key != "" {
			req.Header.Set("x-api-key", key)
		}
		start := time.Now()
		resp, err := client.Do(req)
		took := time.Since(start)
		if err != nil || resp.StatusCode != http.StatusNoContent {
			b.Fatalf("GET %s: %v %v", path, err, resp)
		}
		resp.Body.Close()
		return took
	}
	for i := 0; i < 200; i++ { // warm up connections and the key cache
		get("/bench-noop", "")
		get("/api/v1/bench-noop", f.adv)
	}
	base := make([]time.Duration, 0, b.N)
	authd := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		base = append(base, get("/bench-noop", ""))
		authd = append(authd, get("/api/v1/bench-noop", f.adv))
	}
	b.StopTimer()
	pct := func(d []time.Duration, p float64) float64 {
		sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
		return float64(d[int(float64(len(d)-1)*p)].Microseconds())
	}
	b.ReportMetric(pct(base, 0.50), "base-p50-µs")
	b.ReportMetric(pct(base, 0.99), "base-p99-µs")
	b.ReportMetric(pct(authd, 0.50), "auth-p50-µs")
	b.ReportMetric(pct(authd, 0.99), "auth-p99-µs")
	b.ReportMetric(pct(authd, 0.99)-pct(base, 0.99), "p99-overhead-µs")
}

// BenchmarkKeyAuthenticate is the cost of checking a cached key, without HTTP.
func BenchmarkKeyAuthenticate(b *testing.B) {
	f := newFixture(b)
	ctx := context.Background()
	if _, err := f.keys.Authenticate(ctx, f.adv); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := f.keys.Authenticate(ctx, f.adv); err != nil {
			b.Fatal(err)
		}
	}
}
