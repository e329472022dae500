package tracking_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/partnerstream/partnerstream/internal/clickid"
	"github.com/partnerstream/partnerstream/internal/events"
	"github.com/partnerstream/partnerstream/internal/identity"
	"github.com/partnerstream/partnerstream/internal/ids"
	"github.com/partnerstream/partnerstream/internal/links"
	"github.com/partnerstream/partnerstream/internal/links/linkstest"
	"github.com/partnerstream/partnerstream/internal/store/pgstore"
	"github.com/partnerstream/partnerstream/internal/testenv/pgtest"
	"github.com/partnerstream/partnerstream/internal/tracking"
)

// fakeLinks is a LinkSource over a map, counting lookups.
type fakeLinks struct {
	mu      sync.Mutex
	targets map[string]links.Target
	err     error
	loads   atomic.Int64
	// gate, when set, holds every lookup until it is closed.
	gate chan struct{}
}

func (f *fakeLinks) Resolve(_ context.Context, code string) (links.Target, error) {
	f.loads.Add(1)
	if f.gate != nil {
		<-f.gate
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return links.Target{}, f.err
	}
	t, ok := f.targets[code]
	if !ok {
		return links.Target{}, links.ErrNotFound
	}
	return t, nil
}

func (f *fakeLinks) set(code string, t links.Target) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.targets[code] = t
}

func target(code, program string) links.Target {
	return links.Target{LinkID: "lnk_" + code, Code: code, ProgramID: program, AffiliateID: "co_aff", AdvertiserID: "co_adv",
		LinkStatus: "active", ProgramStatus: "active", PartnershipStatus: "approved", ClickParam: "ps_click_id",
		ProgramLandingURL: "https://shop.test/?x=1", Subs: [5]string{"d1", "d2"}}
}

type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func newClock() *clock { return &clock{now: time.Date(2026, 6, 1, 10, 0, 0, 0, time.UTC)} }

func TestResolverCachesAndForgets(t *testing.T) {
	ctx := context.Background()
	const a, b, other = "AAAAAAAAAAAA", "BBBBBBBBBBBB", "CCCCCCCCCCCC"
	steps := []struct {
		name  string
		act   func(*tracking.Resolver, *fakeLinks, *clock)
		code  string
		err   error
		loads int64 // total lookups after the step
	}{
		{"a first lookup reads the source", nil, a, nil, 1},
		{"a second one is served from memory", nil, a, nil, 1},
		{"until the TTL has passed", func(_ *tracking.Resolver, _ *fakeLinks, c *clock) { c.advance(31 * time.Second) }, a, nil, 2},
		{"a notification for the code drops it", func(r *tracking.Resolver, _ *fakeLinks, _ *clock) { r.Invalidate(a) }, a, nil, 3},
		{"a link of another program is cached", nil, other, nil, 4},
		{"a notification for the program drops its links", func(r *tracking.Resolver, _ *fakeLinks, _ *clock) { r.Invalidate("program:prg_1") }, a, nil, 5},
		{"but not other programs' links", nil, other, nil, 5},
		{"a reset drops everything", func(r *tracking.Resolver, _ *fakeLinks, _ *clock) { r.Reset() }, other, nil, 6},
		{"an unknown code is looked up", nil, "ZZZZZZZZZZZZ", tracking.ErrUnknownLink, 7},
		{"and remembered as unknown for a moment", nil, "ZZZZZZZZZZZZ", tracking.ErrUnknownLink, 7},
		{"a malformed code is refused without a lookup", nil, "not a code!", tracking.ErrUnknownLink, 7},
		{"a paused link is not redirected", func(r *tracking.Resolver, f *fakeLinks, _ *clock) {
			tg := target(b, "prg_1")
			tg.LinkStatus = "paused"
			f.set(b, tg)
		}, b, tracking.ErrUnknownLink, 8},
		{"a suspended partnership is not redirected", func(r *tracking.Resolver, f *fakeLinks, _ *clock) {
			tg := target(b, "prg_1")
			tg.PartnershipStatus = "suspended"
			f.set(b, tg)
			r.Invalidate(b)
		}, b, tracking.ErrUnknownLink, 9},
		{"an expired entry is served stale while the source fails", func(_ *tracking.Resolver, f *fakeLinks, c *clock) {
			c.advance(time.Minute)
			f.err = errors.New("database down")
		}, other, nil, 10},
		{"but not past MaxStale", func(_ *tracking.Resolver, _ *fakeLinks, c *clock) { c.advance(10 * time.Minute) }, other, tracking.ErrUnavailable, 11},
		{"and an uncached code is unavailable", nil, "DDDDDDDDDDDD", tracking.ErrUnavailable, 12},
	}
	src := &fakeLinks{targets: map[string]links.Target{a: target(a, "prg_1"), b: target(b, "prg_1"), other: target(other, "prg_2")}}
	c := newClock()
	r := tracking.NewResolver(src, tracking.ResolverOptions{Now: c.Now})
	for _, s := range steps {
		if s.act != nil {
			s.act(r, src, c)
		}
		d, err := r.Resolve(ctx, s.code)
		if !errors.Is(err, s.err) || (err == nil && d.LinkID != "lnk_"+s.code) {
			t.Fatalf("%s: Resolve(%s) = %+v, %v; want err %v", s.name, s.code, d, err, s.err)
		}
		if got := src.loads.Load(); got != s.loads {
			t.Fatalf("%s: %d lookups, want %d", s.name, got, s.loads)
		}
	}
}

// TestResolverDoesNotCacheALookupThatRacedANotification: the lookup may have read the row
// before the change, and the notification that would evict it has already been handled.
func TestResolverDoesNotCacheALookupThatRacedANotification(t *testing.T) {
	const code = "AAAAAAAAAAAA"
	src := &fakeLinks{targets: map[string]links.Target{code: target(code, "prg_1")}, gate: make(chan struct{})}
	r := tracking.NewResolver(src, tracking.ResolverOptions{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		if _, err := r.Resolve(context.Background(), code); err != nil {
			t.Error(err)
		}
	}()
	for src.loads.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	r.Invalidate(code)
	close(src.gate)
	<-done
	if _, err := r.Resolve(context.Background(), code); err != nil {
		t.Fatal(err)
	}
	if got := src.loads.Load(); got != 2 {
		t.Fatalf("%d lookups, want 2: the raced lookup must not have been cached", got)
	}
}

// TestChangesReachTheCacheThroughNotify runs the real chain: links service, Postgres
// NOTIFY, pgstore.Listen, Resolver. The TTL is an hour, so only the notification can
// make the cache see a change.
func TestChangesReachTheCacheThroughNotify(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, db := pgtest.Migrated(t)
	svc := links.NewService(db, links.Options{BaseURL: "http://127.0.0.1"})
	adv, aff := linkstest.Company(t, db, identity.Advertiser), linkstest.Company(t, db, identity.Affiliate)
	program := linkstest.Program(t, db, adv, "https://shop.example.test/", "")
	partnership := linkstest.Partnership(t, db, program, aff, "approved")
	l, err := svc.Create(ctx, aff, identity.Affiliate, links.NewLink{ProgramID: program})
	if err != nil {
		t.Fatal(err)
	}

	r := tracking.NewResolver(svc, tracking.ResolverOptions{TTL: time.Hour, NegativeTTL: time.Hour})
	pgtest.Listen(t, db, pgstore.Subscription{Channel: links.ChangedChannel, Notify: r.Invalidate, Reset: r.Reset})

	eventually := func(what string, want error) {
		t.Helper()
		deadline := time.Now().Add(3 * time.Second)
		for {
			_, err := r.Resolve(ctx, l.Code)
			if errors.Is(err, want) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: Resolve = %v after 3 s, want %v", what, err, want)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	eventually("a new link", nil)
	steps := []struct {
		name   string
		change func()
		want   error
	}{
		{"pausing the link", func() { svc.SetStatus(ctx, aff, identity.Affiliate, l.ID, links.Paused) }, tracking.ErrUnknownLink},
		{"resuming it", func() { svc.SetStatus(ctx, aff, identity.Affiliate, l.ID, links.Active) }, nil},
		{"pausing the program", func() { linkstest.SetProgramStatus(t, db, program, "paused") }, tracking.ErrUnknownLink},
		{"activating it again", func() { linkstest.SetProgramStatus(t, db, program, "active") }, nil},
		{"suspending the partnership", func() { linkstest.SetPartnershipStatus(t, db, partnership, "suspended") }, tracking.ErrUnknownLink},
	}
	for _, s := range steps {
		s.change()
		eventually(s.name, s.want)
	}
}

// recorded is a ClickRecorder that keeps the clicks.
type recorded struct {
	mu     sync.Mutex
	clicks []events.Click
	err    error
}

func (r *recorded) Record(_ context.Context, c events.Click) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.clicks = append(r.clicks, c)
	return r.err
}

// The redirect says who the visitor is, the same on every replica with the same keys; ingest
// decides from it which clicks are unique (internal/ingest).
func TestClickSaysTheVisitorAndFlagsBots(t *testing.T) {
	const code = "AAAAAAAAAAAA"
	src := &fakeLinks{targets: map[string]links.Target{code: target(code, "prg_1")}}
	c := newClock()
	keys, err := clickid.ParseKeys(clickid.GenerateKeySpec())
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorded{}
	replicas := make([]*tracking.Service, 2)
	for i := range replicas {
		replicas[i] = tracking.NewService(tracking.NewResolver(src, tracking.ResolverOptions{Now: c.Now}), rec,
			tracking.ServiceOptions{Now: c.Now, ClickIDs: keys})
	}
	const browser = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0 Safari/537.36"
	var cookie string
	// visitor names the visitor a step's click must carry: steps with the same name, the same
	// visitor; another name, another one.
	steps := []struct {
		name      string
		visit     func() tracking.Visit
		visitor   string
		bot       bool
		newCookie bool
	}{
		{"a first visit gets a visitor cookie", func() tracking.Visit {
			return tracking.Visit{IP: "198.51.100.1", UserAgent: browser}
		}, "first", false, true},
		{"with its cookie from another address it is the same visitor", func() tracking.Visit {
			return tracking.Visit{IP: "198.51.100.99", UserAgent: browser, VisitorID: cookie}
		}, "first", false, false},
		{"the same address and browser without a cookie is the same visitor", func() tracking.Visit {
			return tracking.Visit{IP: "198.51.100.1", UserAgent: browser}
		}, "first", false, true},
		{"another visitor behind the same address with its own cookie is another", func() tracking.Visit {
			return tracking.Visit{IP: "198.51.100.1", UserAgent: browser, VisitorID: "bbbbbbbbbbbbbbbbbbbbbb"}
		}, "own cookie", false, false},
		{"a forged cookie is ignored", func() tracking.Visit {
			return tracking.Visit{IP: "198.51.100.2", UserAgent: browser, VisitorID: "x"}
		}, "forged", false, true},
		{"a crawler is redirected but flagged", func() tracking.Visit {
			return tracking.Visit{IP: "66.249.66.1", UserAgent: "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)"}
		}, "crawler", true, true},
		{"an empty user agent is a bot", func() tracking.Visit { return tracking.Visit{IP: "192.0.2.1"} }, "empty", true, true},
		{"an hour later the cookie is still the visitor", func() tracking.Visit {
			c.advance(time.Hour)
			return tracking.Visit{IP: "198.51.100.1", UserAgent: browser, VisitorID: cookie}
		}, "first", false, false},
		{"but the address and browser without it make another", func() tracking.Visit {
			return tracking.Visit{IP: "198.51.100.1", UserAgent: browser}
		}, "next hour", false, true},
	}
	visitors := map[string]string{} // step visitor name: hash
	for i, s := range steps {
		v := s.visit()
		v.Code = code
		rd, err := replicas[i%2].Click(context.Background(), v)
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		got := rd.Click
		if got.IsBot != s.bot || got.IsDuplicate || (rd.NewVisitorIDString() != "") != s.newCookie {
			t.Fatalf("%s: bot=%v dup=%v new cookie %q", s.name, got.IsBot, got.IsDuplicate, rd.NewVisitorIDString())
		}
		if cookie == "" {
			cookie = rd.NewVisitorIDString()
		} else if s.visitor == "first" && s.newCookie && rd.NewVisitorIDString() != cookie {
			t.Fatalf("%s: handed out cookie %q, want the first one %q", s.name, rd.NewVisitorIDString(), cookie)
		}
		if len(got.Visitor) != 22 || got.Visitor == cookie {
			t.Fatalf("%s: the click carries visitor %q: want a 22-character hash, not the cookie", s.name, got.Visitor)
		}
		if want, ok := visitors[s.visitor]; ok && got.Visitor != want {
			t.Fatalf("%s: visitor %q, want %q as in an earlier step", s.name, got.Visitor, want)
		}
		for name, other := range visitors {
			if name != s.visitor && other == got.Visitor {
				t.Fatalf("%s: visitor %q is also visitor %q", s.name, got.Visitor, name)
			}
		}
		visitors[s.visitor] = got.Visitor
	}
	if len(rec.clicks) != len(steps) {
		t.Fatalf("%d clicks recorded, want %d", len(rec.clicks), len(steps))
	}
}

func TestClickCarriesTheLinkAndRequestAndRedirectsWithTheClickID(t *testing.T) {
	const code = "AAAAAAAAAAAA"
	tg := target(code, "prg_1")
	tg.ClickParam, tg.PromotionID = "aff_click", "prm_1"
	src := &fakeLinks{targets: map[string]links.Target{code: tg}}
	c := newClock()
	rec := &recorded{err: errors.New("spool full")} // a dropped click still redirects
	svc := tracking.NewService(tracking.NewResolver(src, tracking.ResolverOptions{Now: c.Now}), rec, tracking.ServiceOptions{Now: c.Now})
	long := strings.Repeat("ñ", 300)
	rd, err := svc.Click(context.Background(), tracking.Visit{Code: code, IP: "203.0.113.9", UserAgent: "Mozilla/5.0 " + strings.Repeat("x", 2000),
		Referrer: "https://blog.test/post", Subs: [5]string{"", "q2", "", "", long}})
	if err != nil {
		t.Fatal(err)
	}
	cl := rd.Click
	if !strings.HasPrefix(cl.ClickID, "clk_") || rd.Location() != "https://shop.test/?x=1&aff_click="+cl.ClickID {
		t.Fatalf("location %s for click %s", rd.Location(), cl.ClickID)
	}
	want := events.Click{ClickID: cl.ClickID, Visitor: cl.Visitor, OccurredAt: c.Now(), LinkID: "lnk_" + code, ProgramID: "prg_1", AffiliateID: "co_aff", AdvertiserID: "co_adv",
		PromotionID: "prm_1", Sub1: "d1", Sub2: "q2", Sub5: strings.Repeat("ñ", 255), IP: "203.0.113.9", UserAgent: cl.UserAgent,
		Referrer: "https://blog.test/post", LandingURL: "https://shop.test/?x=1"}
	if cl != want {
		t.Fatalf("click\n%+v\nwant\n%+v", cl, want)
	}
	if len(cl.UserAgent) != tracking.MaxUserAgentLen {
		t.Fatalf("user agent of %d bytes, want it cut to %d", len(cl.UserAgent), tracking.MaxUserAgentLen)
	}
	if rec.clicks[0] != cl {
		t.Fatal("the recorder got another click than the one returned")
	}
	if l, err := svc.Landing(context.Background(), code); err != nil || l != "https://shop.test/?x=1" {
		t.Fatalf("Landing = %q, %v", l, err)
	}
	if _, err := svc.Click(context.Background(), tracking.Visit{Code: "ZZZZZZZZZZZZ"}); !errors.Is(err, tracking.ErrUnknownLink) {
		t.Fatalf("unknown code: %v", err)
	}
}

func TestClickIDIsSignedWithTheFirstKeyAndCarriesLinkAndTime(t *testing.T) {
	const code = "AAAAAAAAAAAA"
	tg := target(code, "prg_1")
	tg.LinkID = ids.New(ids.Link)
	src := &fakeLinks{targets: map[string]links.Target{code: tg}}
	c := newClock()
	keys, err := clickid.ParseKeys(clickid.GenerateKeySpec())
	if err != nil {
		t.Fatal(err)
	}
	svc := tracking.NewService(tracking.NewResolver(src, tracking.ResolverOptions{Now: c.Now}), &recorded{}, tracking.ServiceOptions{Now: c.Now, ClickIDs: keys})
	rd, err := svc.Click(context.Background(), tracking.Visit{Code: code, IP: "203.0.113.9"})
	if err != nil {
		t.Fatal(err)
	}
	got, ok := keys.Verify(rd.Click.ClickID)
	if !ok || got.LinkID != tg.LinkID || !got.At.Equal(c.Now()) || !strings.HasSuffix(rd.Location(), "ps_click_id="+rd.Click.ClickID) {
		t.Fatalf("click id %s (location %s) verifies to %+v, %v; want link %s at %s", rd.Click.ClickID, rd.Location(), got, ok, tg.LinkID, c.Now())
	}
}

// BenchmarkServiceClick is the redirect's own work for a cached link, without HTTP and with
// a recorder that keeps nothing: lookup, bot and duplicate checks, ids, location; with plain
// and with signed click ids, to compare in one run.
func BenchmarkServiceClick(b *testing.B) {
	const code = "AAAAAAAAAAAA"
	tg := target(code, "prg_1")
	tg.LinkID = ids.New(ids.Link)
	src := &fakeLinks{targets: map[string]links.Target{code: tg}}
	keys, err := clickid.ParseKeys(clickid.GenerateKeySpec())
	if err != nil {
		b.Fatal(err)
	}
	v := tracking.Visit{Code: code, IP: "203.0.113.9", UserAgent: "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36",
		Referrer: "https://blog.example.com/post", Subs: [5]string{"", "wrk"}}
	b.Run("signed", func(b *testing.B) {
		svc := tracking.NewService(tracking.NewResolver(src, tracking.ResolverOptions{}), discard{}, tracking.ServiceOptions{ClickIDs: keys})
		b.ReportAllocs()
		for b.Loop() {
			if _, err := svc.Click(context.Background(), v); err != nil {
				b.Fatal(err)
			}
		}
	})
}

type discard struct{}

func (discard) Record(context.Context, events.Click) error { return nil }
