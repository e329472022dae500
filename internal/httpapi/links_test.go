package httpapi_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3filter"

	"github.com/partnerstream/partnerstream/internal/clickid"
	"github.com/partnerstream/partnerstream/internal/events"
	"github.com/partnerstream/partnerstream/internal/httpapi"
	"github.com/partnerstream/partnerstream/internal/identity"
	"github.com/partnerstream/partnerstream/internal/links"
	"github.com/partnerstream/partnerstream/internal/links/linkstest"
	"github.com/partnerstream/partnerstream/internal/store/pgstore"
	"github.com/partnerstream/partnerstream/internal/testenv/pgtest"
	"github.com/partnerstream/partnerstream/internal/tracking"
	"github.com/partnerstream/partnerstream/internal/tracking/trackingtest"
)

// The redirect's pages are HTML; kin-openapi validates only the body types it has a decoder
// for.
func init() { openapi3filter.RegisterBodyDecoder("text/html", openapi3filter.PlainBodyDecoder) }

// trackingFixture is the shared fixture with the tracking routes mounted over real
// Postgres and an embedded Kafka, a program the affiliate is approved for, and the cache
// listener running.
type trackingFixture struct {
	*fixture
	links       *links.Service
	broker      *trackingtest.Broker
	recorder    *tracking.Recorder
	program     string
	partnership string
	affSession  map[string]string
	clickIDs    clickid.Keys // sign the redirect's click ids
}

func newTrackingFixture(t *testing.T, mode tracking.Mode) *trackingFixture {
	t.Helper()
	f := &trackingFixture{fixture: newFixture(t)}
	f.program = linkstest.Program(t, f.db, f.advID, "https://shop.example.test/landing?lang=en#top", "")
	f.partnership = linkstest.Partnership(t, f.db, f.program, f.affID, "approved")
	f.affSession = f.dashboardAs(t, identity.Affiliate, "member")

	f.links = links.NewService(f.db, links.Options{BaseURL: "https://go.example.test"})
	f.broker = trackingtest.StartBroker(t)
	var err error
	f.recorder, err = tracking.NewRecorder(tracking.RecorderOptions{Kafka: f.broker.Config, Mode: mode, SpoolDir: t.TempDir(),
		AckTimeout: 30 * time.Millisecond, Log: quiet})
	if err != nil {
		t.Fatal(err)
	}
	trackingtest.RunRecorder(t, f.recorder)
	resolver := tracking.NewResolver(f.links, tracking.ResolverOptions{})
	pgtest.Listen(t, f.db, pgstore.Subscription{Channel: links.ChangedChannel, Notify: resolver.Invalidate, Reset: resolver.Reset})
	if f.clickIDs, err = clickid.ParseKeys(clickid.GenerateKeySpec()); err != nil {
		t.Fatal(err)
	}
	f.srv.MountTracking(f.links, tracking.NewService(resolver, f.recorder, tracking.ServiceOptions{ClickIDs: f.clickIDs}), httpapi.TrackingOptions{SecureCookies: true})
	return f
}

// link is a tracking link answer; a pointer tells a missing field from an empty one.
type link struct {
	ID            string  `json:"id"`
	Code          string  `json:"code"`
	URL           string  `json:"url"`
	Sub1          string  `json:"sub1"`
	Status        string  `json:"status"`
	PartnershipID string  `json:"partnership_id"`
	PromotionID   *string `json:"promotion_id"`
	// The companies' names.
	AffiliateName  string `json:"affiliate_name"`
	AdvertiserName string `json:"advertiser_name"`
}

func (f *trackingFixture) createLink(t *testing.T, body string) link {
	t.Helper()
	r := f.do(t, "POST", "/api/v1/tracking-links", apiKey(f.aff), body)
	if r.status != 201 {
		t.Fatalf("create link: %d %s", r.status, r.raw)
	}
	return decode[link](t, r)
}

func TestTrackingLinkRoutes(t *testing.T) {
	f := newTrackingFixture(t, tracking.ModeAck)
	created := f.createLink(t, fmt.Sprintf(`{"program_id":%q,"sub1":"newsletter"}`, f.program))
	id, code := created.ID, created.Code
	if created.URL != "https://go.example.test/c/"+code || created.Sub1 != "newsletter" || created.Status != "active" ||
		created.PartnershipID != f.partnership || created.PromotionID != nil {
		t.Fatalf("created %+v", created)
	}
	noPartnership := linkstest.Program(t, f.db, f.advID, "https://other.example.test/", "")
	_, rivalKey := f.company(t, identity.Advertiser)

	cases := []struct {
		name    string
		method  string
		path    string
		headers map[string]string
		body    string
		status  int
		code    string
	}{
		{"the dashboard creates links too", "POST", "/api/tracking-links", f.affSession, fmt.Sprintf(`{"program_id":%q}`, f.program), 201, ""},
		{"an advertiser cannot create links", "POST", "/api/v1/tracking-links", apiKey(f.adv), fmt.Sprintf(`{"program_id":%q}`, f.program), 403, "affiliates_only"},
		{"a program without a partnership is refused", "POST", "/api/v1/tracking-links", apiKey(f.aff), fmt.Sprintf(`{"program_id":%q}`, noPartnership), 403, "partnership_not_approved"},
		{"an unknown program is 404", "POST", "/api/v1/tracking-links", apiKey(f.aff), `{"program_id":"prg_00000000000000000000000000"}`, 404, "not_found"},
		{"a destination off the program's site is refused", "POST", "/api/v1/tracking-links", apiKey(f.aff),
			fmt.Sprintf(`{"program_id":%q,"destination_url":"https://evil.test/"}`, f.program), 400, "validation_failed"},
		{"a malformed program id is refused", "POST", "/api/v1/tracking-links", apiKey(f.aff), `{"program_id":"x"}`, 400, "validation_failed"},
		{"an unknown field is refused", "POST", "/api/v1/tracking-links", apiKey(f.aff), `{"program":"x"}`, 400, "invalid_json"},
		{"without a key it is 401", "POST", "/api/v1/tracking-links", nil, `{}`, 401, "missing_credentials"},
		{"a bad program filter is 400", "GET", "/api/v1/tracking-links?program_id=x", apiKey(f.aff), "", 400, "validation_failed"},
		{"the advertiser cannot pause an affiliate's link", "POST", "/api/v1/tracking-links/" + id + "/pause", apiKey(f.adv), "", 403, "affiliates_only"},
		{"an unknown link is 404", "POST", "/api/v1/tracking-links/lnk_00000000000000000000000000/pause", apiKey(f.aff), "", 404, "not_found"},
		{"a malformed link id is 404", "POST", "/api/tracking-links/nope/resume", f.affSession, "", 404, "not_found"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			expect(t, f.do(t, c.method, c.path, c.headers, c.body), c.status, c.code)
		})
	}

	t.Run("lists are scoped to the caller's company", func(t *testing.T) {
		for who, want := range map[string]int{f.aff: 2, f.adv: 2, rivalKey: 0} {
			r := f.do(t, "GET", "/api/v1/tracking-links?program_id="+f.program, apiKey(who), "")
			if got := idsOf(t, r); len(got) != want {
				t.Fatalf("list: %d %s, want %d links", r.status, r.raw, want)
			}
		}
		for _, who := range []string{f.aff, f.adv} {
			r := f.do(t, "GET", "/api/v1/tracking-links?program_id="+f.program, apiKey(who), "")
			if l := decode[list[link]](t, r).Data[0]; l.AffiliateName != "affiliate co" || l.AdvertiserName != "advertiser co" {
				t.Fatalf("the names of a link: %s", r.raw)
			}
		}
		r := f.do(t, "GET", "/api/tracking-links?limit=1", f.affSession, "")
		first := decode[list[resource]](t, r)
		if r.status != 200 || len(first.Data) != 1 || first.NextCursor == "" {
			t.Fatalf("first page: %s", r.raw)
		}
		r = f.do(t, "GET", "/api/tracking-links?limit=1&cursor="+first.NextCursor, f.affSession, "")
		if second := decode[list[resource]](t, r); r.status != 200 || len(second.Data) != 1 || second.Data[0].ID != id || second.NextCursor != "" {
			t.Fatalf("second page: %s", r.raw)
		}
	})
	t.Run("the refusal says the partnership's status", func(t *testing.T) {
		r := f.do(t, "POST", "/api/v1/tracking-links", apiKey(f.aff), fmt.Sprintf(`{"program_id":%q}`, noPartnership))
		if r.problem.PartnershipStatus != "none" {
			t.Fatalf("%s", r.raw)
		}
	})
	t.Run("a retried create with the same key is the same link", func(t *testing.T) {
		h := map[string]string{"x-api-key": f.aff, "Idempotency-Key": "link-1"}
		body := fmt.Sprintf(`{"program_id":%q}`, f.program)
		first, again := f.do(t, "POST", "/api/v1/tracking-links", h, body), f.do(t, "POST", "/api/v1/tracking-links", h, body)
		if first.status != 201 || decode[link](t, again).ID != decode[link](t, first).ID || again.header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("first %s, again %s", first.raw, again.raw)
		}
	})
	t.Run("an idempotency key with a control character is refused", func(t *testing.T) {
		h := map[string]string{"x-api-key": f.aff, "Idempotency-Key": "link\t2"}
		if r := f.do(t, "POST", "/api/v1/tracking-links", h, fmt.Sprintf(`{"program_id":%q}`, f.program)); r.status != 400 || r.problem.Code != "invalid_idempotency_key" {
			t.Fatalf("%d %s", r.status, r.raw)
		}
	})
	t.Run("pause and resume", func(t *testing.T) {
		for _, s := range []struct{ path, status string }{{"/pause", "paused"}, {"/pause", "paused"}, {"/resume", "active"}} {
			r := f.do(t, "POST", "/api/tracking-links/"+id+s.path, f.affSession, "")
			if r.status != 200 || decode[link](t, r).Status != s.status {
				t.Fatalf("%s: %d %s", s.path, r.status, r.raw)
			}
		}
	})
}

// TestTheTrackingRoutesAreDocumented compares the routes MountTracking adds with the paths
// of 21-links.yaml.
func TestTheTrackingRoutesAreDocumented(t *testing.T) {
	assertAreaDocumented(t, func(s *httpapi.Server) { s.MountTracking(nil, nil, httpapi.TrackingOptions{}) }, "openapi/21-links.yaml")
}

// browser talks to the server over real HTTP on loopback, like a browser that does not
// follow redirects: every response is checked against the OpenAPI document.
type browser struct {
	base   string
	client *http.Client
}

func (f *trackingFixture) serve(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = f.srv.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	addr, err := f.srv.Addr(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return "http://" + addr
}

func newBrowser(base string) *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{base: base, client: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

type answer struct {
	status int
	header http.Header
	body   string
}

func (b *browser) get(t *testing.T, method, path string, headers map[string]string) answer {
	t.Helper()
	req, err := http.NewRequest(method, b.base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("User-Agent", "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0 Safari/537.36")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := b.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if method == "GET" {
		checkAgainstSpec(t, req, resp.StatusCode, resp.Header, body)
	}
	return answer{status: resp.StatusCode, header: resp.Header, body: string(body)}
}

// clickID returns the click id in a redirect's Location under param, failing on anything
// else than a redirect to want with it.
func clickID(t *testing.T, a answer, want, param string) string {
	t.Helper()
	loc := a.header.Get("Location")
	head, tail, _ := strings.Cut(want, "#")
	sep := "?"
	if strings.Contains(head, "?") {
		sep = "&"
	}
	prefix := head + sep + param + "="
	if a.status != 302 || !strings.HasPrefix(loc, prefix) || (tail != "" && !strings.HasSuffix(loc, "#"+tail)) {
		t.Fatalf("got %d Location %q, want a 302 to %s<click id>", a.status, loc, prefix)
	}
	id := strings.TrimPrefix(loc, prefix)
	if tail != "" {
		id = strings.TrimSuffix(id, "#"+tail)
	}
	if !strings.HasPrefix(id, "clk_") {
		t.Fatalf("click id %q", id)
	}
	return id
}

func TestClickRedirect(t *testing.T) {
	f := newTrackingFixture(t, tracking.ModeAck)
	base := f.serve(t)
	made := f.createLink(t, fmt.Sprintf(`{"program_id":%q,"sub1":"d1","sub2":"d2"}`, f.program))
	code := made.Code
	const landing = "https://shop.example.test/landing?lang=en#top"

	b := newBrowser(base)
	first := b.get(t, "GET", "/c/"+code+"?sub2=q2&sub5=q5", map[string]string{"Referer": "https://blog.example.test/post"})
	id := clickID(t, first, landing, "ps_click_id")
	if first.header.Get("Cache-Control") != "no-store" {
		t.Errorf("Cache-Control %q", first.header.Get("Cache-Control"))
	}
	cookies := strings.Join(first.header.Values("Set-Cookie"), "\n")
	for _, want := range []string{"ps_vid=", "path=/c/", "ps_click=" + id, "max-age=2592000", "HttpOnly", "secure", "SameSite=Lax"} {
		if !strings.Contains(cookies, want) {
			t.Errorf("Set-Cookie %q lacks %q", cookies, want)
		}
	}

	// In ack mode the click is on Kafka before the redirect is answered.
	got := trackingtest.ReadClicksOnce(t, f.broker.Config)
	trackingtest.ExactlyOnce(t, got, []string{id})
	c := got[0].Click
	if c.LinkID != made.ID || c.ProgramID != f.program || c.AffiliateID != f.affID || c.AdvertiserID != f.advID ||
		c.Sub1 != "d1" || c.Sub2 != "q2" || c.Sub3 != "" || c.Sub5 != "q5" || c.IP != "127.0.0.1" ||
		!strings.HasPrefix(c.UserAgent, "Mozilla/5.0") || c.Referrer != "https://blog.example.test/post" ||
		c.IsBot || c.IsDuplicate || c.LandingURL != landing || time.Since(c.OccurredAt) > time.Minute {
		t.Fatalf("click on Kafka: %+v", c)
	}

	t.Run("a repeat click of the same browser carries the same visitor", func(t *testing.T) {
		again := clickID(t, b.get(t, "GET", "/c/"+code, nil), landing, "ps_click_id")
		if r := clickOf(t, f, again); r.Visitor != c.Visitor || r.Visitor == "" || r.IsBot {
			t.Fatalf("repeat click: %+v, first click's visitor %q", r, c.Visitor)
		}
	})
	t.Run("a crawler is redirected and flagged", func(t *testing.T) {
		id := clickID(t, newBrowser(base).get(t, "GET", "/c/"+code, map[string]string{"User-Agent": "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)"}), landing, "ps_click_id")
		if c := clickOf(t, f, id); !c.IsBot || c.IsDuplicate {
			t.Fatalf("crawler click: %+v", c)
		}
	})
	t.Run("the program's parameter name is used", func(t *testing.T) {
		program := linkstest.Program(t, f.db, f.advID, "https://named.example.test/", "aff_click")
		linkstest.Partnership(t, f.db, program, f.affID, "approved")
		other := f.createLink(t, fmt.Sprintf(`{"program_id":%q}`, program)).Code
		clickID(t, newBrowser(base).get(t, "GET", "/c/"+other, nil), "https://named.example.test/", "aff_click")
	})
	t.Run("a browser with 12 KiB of cookies is redirected", func(t *testing.T) {
		var cookies []string
		for i := range 52 {
			cookies = append(cookies, fmt.Sprintf("shop_pref_%02d=%s", i, strings.Repeat("v", 240)))
		}
		header := strings.Join(cookies, "; ")
		if len(header) < 12<<10 {
			t.Fatalf("the cookies are %d bytes", len(header))
		}
		clickID(t, newBrowser(base).get(t, "GET", "/c/"+code, map[string]string{"Cookie": header}), landing, "ps_click_id")
	})
	t.Run("control characters in sub-ids are dropped before the click is stored", func(t *testing.T) {
		id := clickID(t, newBrowser(base).get(t, "GET", "/c/"+code+"?sub1=%0d%0aSet-Cookie:%20x&sub3=a%07b%00c&sub4=%0d%0a", nil), landing, "ps_click_id")
		c := clickOf(t, f, id)
		if c.Sub1 != "Set-Cookie: x" || c.Sub2 != "d2" || c.Sub3 != "abc" || c.Sub4 != "" {
			t.Fatalf("subs %q %q %q %q, want the control characters dropped (and the link's default where nothing is left)", c.Sub1, c.Sub2, c.Sub3, c.Sub4)
		}
	})
	t.Run("HEAD answers where the link goes and records nothing", func(t *testing.T) {
		before := len(trackingtest.ReadClicksOnce(t, f.broker.Config))
		a := newBrowser(base).get(t, "HEAD", "/c/"+code, nil)
		if a.status != 302 || a.header.Get("Location") != landing || len(a.header.Values("Set-Cookie")) != 0 {
			t.Fatalf("HEAD: %d %v", a.status, a.header)
		}
		if after := len(trackingtest.ReadClicksOnce(t, f.broker.Config)); after != before {
			t.Fatalf("HEAD recorded %d clicks", after-before)
		}
	})

	notFound := func(t *testing.T, path, lang, text string) {
		t.Helper()
		deadline := time.Now().Add(3 * time.Second)
		for {
			a := newBrowser(base).get(t, "GET", path, map[string]string{"Accept-Language": lang})
			if a.status == 404 {
				if !strings.HasPrefix(a.header.Get("Content-Type"), "text/html") || !strings.Contains(a.body, text) {
					t.Fatalf("404 page: %s %s", a.header.Get("Content-Type"), a.body)
				}
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("GET %s = %d after 3 s, want the 404 page", path, a.status)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	t.Run("an unknown code gets the friendly 404 page", func(t *testing.T) {
		notFound(t, "/c/ZZZZZZZZZZZZ", "en", "Link not available")
		notFound(t, "/c/no-such-thing", "es-ES,es;q=0.9", "Enlace no disponible")
	})
	t.Run("pausing the link reaches the redirect at once", func(t *testing.T) {
		if r := f.do(t, "POST", "/api/v1/tracking-links/"+made.ID+"/pause", apiKey(f.aff), ""); r.status != 200 {
			t.Fatalf("pause: %s", r.raw)
		}
		notFound(t, "/c/"+code, "en", "Link not available")
		f.do(t, "POST", "/api/v1/tracking-links/"+made.ID+"/resume", apiKey(f.aff), "")
	})
	t.Run("a paused program's links get the 404 page", func(t *testing.T) {
		linkstest.SetProgramStatus(t, f.db, f.program, "paused")
		notFound(t, "/c/"+code, "en", "Link not available")
	})
}

// clickOf returns a click from the topic; in ack mode it is there once redirected.
func clickOf(t *testing.T, f *trackingFixture, id string) events.Click {
	t.Helper()
	for _, m := range trackingtest.ReadClicksOnce(t, f.broker.Config) {
		if m.Click.ClickID == id {
			return m.Click
		}
	}
	t.Fatalf("click %s is not on the topic", id)
	return events.Click{}
}

// TestNoClickIsLostOrDuplicatedWhileTheBrokerIsDown: stop the broker, click N times (each
// answered with a redirect), start it again: exactly those N clicks reach the topic.
func TestNoClickIsLostOrDuplicatedWhileTheBrokerIsDown(t *testing.T) {
	f := newTrackingFixture(t, tracking.ModeAck)
	base := f.serve(t)
	code := f.createLink(t, fmt.Sprintf(`{"program_id":%q}`, f.program)).Code
	const landing = "https://shop.example.test/landing?lang=en#top"
	var mu sync.Mutex
	var want []string
	click := func(n int) {
		var wg sync.WaitGroup
		for range n {
			wg.Go(func() {
				id := clickID(t, newBrowser(base).get(t, "GET", "/c/"+code, nil), landing, "ps_click_id")
				mu.Lock()
				want = append(want, id)
				mu.Unlock()
			})
		}
		wg.Wait()
	}
	click(5)
	f.broker.Stop()
	start := time.Now()
	click(40)
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("40 redirects with the broker down took %s", took)
	}
	if f.recorder.SpoolBytes() == 0 {
		t.Fatal("nothing was spooled with the broker down")
	}
	f.broker.Start()
	trackingtest.ReadClicks(t, f.broker.Config, len(want), 30*time.Second)
	time.Sleep(2 * time.Second) // a duplicate, if any, would show up by now
	trackingtest.ExactlyOnce(t, trackingtest.ReadClicksOnce(t, f.broker.Config), want)
	trackingtest.WaitForEmptySpool(t, f.recorder, 5*time.Second)
}

// failingLinks is a link store that is down.
type failingLinks struct{}

func (failingLinks) Resolve(context.Context, string) (links.Target, error) {
	return links.Target{}, errors.New("connection refused")
}

func TestTheRedirectAnswersAPageNotA500WhenTheDatabaseIsDown(t *testing.T) {
	f := newFakeFixture(t)
	svc := tracking.NewService(tracking.NewResolver(failingLinks{}, tracking.ResolverOptions{}), nil, tracking.ServiceOptions{})
	f.srv.MountTracking(nil, svc, httpapi.TrackingOptions{})
	r := f.do(t, "GET", "/c/AAAAAAAAAAAA", nil, "")
	if r.status != 503 || !strings.Contains(r.raw, "Please try again") || r.header.Get("Retry-After") == "" {
		t.Fatalf("%d %v %s", r.status, r.header, r.raw)
	}
}
