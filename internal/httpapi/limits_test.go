package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/partnerstream/partnerstream/internal/health"
	"github.com/partnerstream/partnerstream/internal/httpapi"
	"github.com/partnerstream/partnerstream/internal/ratelimit"
	"github.com/partnerstream/partnerstream/internal/testenv"
)

// replicaSet is n api servers over the fixture's Postgres, sharing their rate-limit counts
// there as the api's replicas do, each with its counts flushed (RunLimits) until stop.
type replicaSet struct {
	servers []*httpapi.Server
	stop    func()
}

// replicas starts n servers with the fixture's options changed by change, on a clock that
// stands still at the start of a minute (a window cannot end mid-test); mount adds routes.
func replicas(t *testing.T, f *fixture, n int, change func(*httpapi.Options), mount func(*httpapi.Server)) replicaSet {
	t.Helper()
	opts := httpapi.Options{Addr: "127.0.0.1:0", Log: quiet, Health: health.NewRegistry(), Keys: f.keys, Sessions: httpapi.SessionAuth(f.sessions)}
	opts.Limits = ratelimit.NewPostgres(f.db)
	opts.Now = testenv.NewClock().Now
	change(&opts)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var rs replicaSet
	for range n {
		srv := httpapi.New(opts)
		srv.MountAPIKeys(f.ids)
		if mount != nil {
			mount(srv)
		}
		rs.servers = append(rs.servers, srv)
		wg.Go(func() { srv.RunLimits(ctx) })
	}
	var once sync.Once
	rs.stop = func() { once.Do(func() { cancel(); wg.Wait() }) }
	t.Cleanup(rs.stop)
	return rs
}

// send is one request to srv from any goroutine, with its status and headers.
func send(srv *httpapi.Server, method, path string, headers map[string]string) (*http.Response, error) {
	req := httptest.NewRequest(method, path, nil)
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := srv.App().Test(req, 10_000)
	if err == nil {
		resp.Body.Close()
	}
	return resp, err
}

// Three replicas hammered at once with one API key serve its budget, within 10 %, answer
// 429 with Retry-After beyond it, and a new replica (a restart) starts from the same count.
func TestReplicasShareOneCredentialBudget(t *testing.T) {
	f := newFixture(t)
	const budget = 150
	rs := replicas(t, f, 3, func(o *httpapi.Options) { o.RateLimit = httpapi.RateLimit{Requests: budget, Window: time.Minute} }, nil)
	var ok, limited, next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 1)
	for range 8 {
		wg.Go(func() {
			for i := next.Add(1); i <= 3*budget; i = next.Add(1) {
				resp, err := send(rs.servers[i%3], "GET", "/api/partner-api/me", apiKey(f.adv))
				switch {
				case err != nil:
					select {
					case errs <- err:
					default:
					}
					return
				case resp.StatusCode == 200:
					ok.Add(1)
				case resp.StatusCode == 429 && resp.Header.Get("Retry-After") == "60" && resp.Header.Get("RateLimit-Remaining") == "0":
					limited.Add(1)
				default:
					select {
					case errs <- fmt.Errorf("status %d, headers %v", resp.StatusCode, resp.Header):
					default:
					}
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	t.Logf("3 replicas served %d of %d requests of one key, budget %d", ok.Load(), 3*budget, budget)
	if got := ok.Load(); got < budget*9/10 || got > budget*11/10 || ok.Load()+limited.Load() != 3*budget {
		t.Fatalf("served %d and limited %d of %d, want %d served within 10 %%", got, limited.Load(), 3*budget, budget)
	}
	// Another key has its own budget; the first request of a key on a replica reads what
	// every replica served, so its headers count them.
	for i := range 3 {
		r := do(t, rs.servers[i], "GET", "/api/partner-api/me", apiKey(f.aff), "")
		if r.status != 200 || r.header.Get("RateLimit-Remaining") != strconv.Itoa(budget-1-i) {
			t.Fatalf("request %d of another key: %d, RateLimit-Remaining %q, want %d", i+1, r.status, r.header.Get("RateLimit-Remaining"), budget-1-i)
		}
	}
	rs.stop()
	restarted := replicas(t, f, 1, func(o *httpapi.Options) { o.RateLimit = httpapi.RateLimit{Requests: budget, Window: time.Minute} }, nil)
	if r := do(t, restarted.servers[0], "GET", "/api/partner-api/me", apiKey(f.adv), ""); r.status != 429 || r.problem.Code != "rate_limited" {
		t.Fatalf("the spent key on a restarted replica: %d %s, want 429", r.status, r.raw)
	}
	if r := do(t, restarted.servers[0], "GET", "/api/partner-api/me", apiKey(f.aff), ""); r.status != 200 || r.header.Get("RateLimit-Remaining") != strconv.Itoa(budget-4) {
		t.Fatalf("the other key on a restarted replica: %d, RateLimit-Remaining %q, want %d", r.status, r.header.Get("RateLimit-Remaining"), budget-4)
	}
}

// An address that keeps sending wrong API keys gets 429 for further wrong ones on every
// replica, while valid keys and sessions from the same address are served; a restarted
// replica keeps the count.
func TestAThrottledAddressStillServesValidCredentials(t *testing.T) {
	f := newFixture(t)
	rs := replicas(t, f, 2, func(o *httpapi.Options) { o.FailedAuthLimit = 3 }, nil)
	wrong := apiKey("ps_live_" + strings.Repeat("x", 40))
	for i := range 3 {
		if r := do(t, rs.servers[i%2], "GET", "/api/partner-api/me", wrong, ""); r.status != 401 {
			t.Fatalf("wrong key %d: %d %s, want 401", i+1, r.status, r.raw)
		}
	}
	session := f.dashboardAs(t, "advertiser", "owner")
	for i := range 4 {
		srv := rs.servers[i%2]
		if r := do(t, srv, "GET", "/api/partner-api/me", wrong, ""); r.status != 429 || r.problem.Code != "too_many_failed_credentials" ||
			r.header.Get("Retry-After") != "60" {
			t.Fatalf("wrong key %d past the limit: %d %v %s, want 429 with Retry-After 60", i+4, r.status, r.header, r.raw)
		}
		if r := do(t, srv, "GET", "/api/partner-api/me", apiKey(f.adv), ""); r.status != 200 {
			t.Fatalf("a valid key from the throttled address: %d %s", r.status, r.raw)
		}
		if r := do(t, srv, "GET", "/api/api-keys", session, ""); r.status != 200 {
			t.Fatalf("a valid session from the throttled address: %d %s", r.status, r.raw)
		}
	}
	rs.stop()
	restarted := replicas(t, f, 1, func(o *httpapi.Options) { o.FailedAuthLimit = 3 }, nil)
	if r := do(t, restarted.servers[0], "GET", "/api/partner-api/me", wrong, ""); r.status != 429 {
		t.Fatalf("a wrong key on a restarted replica: %d %s, want 429", r.status, r.raw)
	}
}

// Each postback token has its own budget, shared by the replicas; a wrong token spends none
// of it.
func TestPostbacksAreLimitedPerToken(t *testing.T) {
	f := newConversionsFixture(t)
	ctx := context.Background()
	const budget = 3
	rs := replicas(t, f.fixture, 2, func(o *httpapi.Options) { o.PostbackLimit = httpapi.RateLimit{Requests: budget, Window: time.Minute} },
		func(srv *httpapi.Server) { srv.MountConversionPostback(f.svc) })
	token := func(program string) string {
		tok, err := f.svc.RotatePostbackToken(ctx, f.advID, program)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	other := f.newProgram(t, f.advID, "EUR")
	first, second := token(f.program), token(other)
	postback := func(i int, tok, program string) response {
		click := f.clicks(t, program, time.Now().Add(-time.Hour), 1)[0]
		return do(t, rs.servers[i%2], "GET", "/postback?token="+tok+"&click_id="+click+"&external_id=o-"+strconv.Itoa(i)+"&amount=5", nil, "")
	}
	wrong := first[:len(first)-4] + "ffff"
	if wrong == first {
		wrong = first[:len(first)-4] + "eeee"
	}
	for i := range budget {
		if r := do(t, rs.servers[i%2], "GET", "/postback?token="+wrong+"&click_id="+f.click(t)+"&external_id=w", nil, ""); r.status != 401 {
			t.Fatalf("a wrong token: %d %s, want 401", r.status, r.raw)
		}
		if r := postback(i, first, f.program); r.status != 200 || r.header.Get("RateLimit-Remaining") != strconv.Itoa(budget-1-i) {
			t.Fatalf("postback %d: %d, RateLimit-Remaining %q, %s", i+1, r.status, r.header.Get("RateLimit-Remaining"), r.raw)
		}
	}
	if r := postback(budget, first, f.program); r.status != 429 || r.problem.Code != "rate_limited" || r.header.Get("Retry-After") != "60" {
		t.Fatalf("a postback past the token's budget: %d %v %s, want 429 with Retry-After", r.status, r.header, r.raw)
	}
	if r := postback(budget+1, second, other); r.status != 200 {
		t.Fatalf("another token: %d %s, want 200", r.status, r.raw)
	}
}
