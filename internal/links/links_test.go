package links_test

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/partnerstream/partnerstream/internal/identity"
	"github.com/partnerstream/partnerstream/internal/links"
	"github.com/partnerstream/partnerstream/internal/links/linkstest"
	"github.com/partnerstream/partnerstream/internal/page"
	"github.com/partnerstream/partnerstream/internal/store/pgstore"
	"github.com/partnerstream/partnerstream/internal/testenv/pgtest"
)

type world struct {
	db                 *pgxpool.Pool
	svc                *links.Service
	adv, aff, otherAff string
	program            string // active, approved partnership with aff
	partnership        string
}

func newWorld(t *testing.T) *world {
	t.Helper()
	_, db := pgtest.Migrated(t)
	w := &world{db: db, svc: links.NewService(db, links.Options{BaseURL: "https://go.example.test/"})}
	w.adv = linkstest.Company(t, db, identity.Advertiser)
	w.aff = linkstest.Company(t, db, identity.Affiliate)
	w.otherAff = linkstest.Company(t, db, identity.Affiliate)
	w.program = linkstest.Program(t, db, w.adv, "https://shop.example.test/landing?lang=en", "")
	w.partnership = linkstest.Partnership(t, db, w.program, w.aff, "approved")
	return w
}

func (w *world) create(t *testing.T, in links.NewLink) links.Link {
	t.Helper()
	l, err := w.svc.Create(context.Background(), w.aff, identity.Affiliate, in)
	if err != nil {
		t.Fatalf("Create(%+v): %v", in, err)
	}
	return l
}

func TestCreateGivesAnUnguessableCodeAndAPublicURL(t *testing.T) {
	w := newWorld(t)
	seen := map[string]bool{}
	for range 50 {
		l := w.create(t, links.NewLink{ProgramID: w.program, Subs: [5]string{"campaign"}})
		if !regexp.MustCompile(`^[0-9A-Za-z]{12}$`).MatchString(l.Code) {
			t.Fatalf("code %q is not 12 base62 characters", l.Code)
		}
		if seen[l.Code] {
			t.Fatalf("code %q handed out twice", l.Code)
		}
		seen[l.Code] = true
		if l.URL != "https://go.example.test/c/"+l.Code {
			t.Fatalf("url %q", l.URL)
		}
		if l.PartnershipID != w.partnership || l.AdvertiserID != w.adv || l.AffiliateID != w.aff || l.Status != links.Active || l.Sub1 != "campaign" {
			t.Fatalf("link %+v", l)
		}
	}
}

func TestCreateNeedsAnApprovedPartnershipWithAnActiveProgram(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	paused := linkstest.Program(t, w.db, w.adv, "https://shop.example.test/", "")
	linkstest.Partnership(t, w.db, paused, w.aff, "approved")
	linkstest.SetProgramStatus(t, w.db, paused, "paused")
	cases := []struct {
		name    string
		status  string // partnership status; "" for none
		program string
		want    string // "none", "pending", ... for NotApprovedError; or an error text
	}{
		{"without a partnership it is refused", "", "", "none"},
		{"a pending partnership is refused", "pending", "", "pending"},
		{"a rejected partnership is refused", "rejected", "", "rejected"},
		{"a suspended partnership is refused", "suspended", "", "suspended"},
		{"a paused program is refused", "", paused, links.ErrProgramNotActive.Error()},
		{"an unknown program is not found", "", "prg_00000000000000000000000000", links.ErrProgramNotFound.Error()},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			program := c.program
			if program == "" {
				program = linkstest.Program(t, w.db, w.adv, "https://shop.example.test/", "")
				if c.status != "" {
					linkstest.Partnership(t, w.db, program, w.aff, c.status)
				}
			}
			_, err := w.svc.Create(ctx, w.aff, identity.Affiliate, links.NewLink{ProgramID: program})
			var na *links.NotApprovedError
			switch {
			case errors.As(err, &na):
				if na.Status != c.want {
					t.Fatalf("status %q, want %q", na.Status, c.want)
				}
			case err == nil || err.Error() != c.want:
				t.Fatalf("err %v, want %s", err, c.want)
			}
		})
	}
	t.Run("an advertiser cannot create links", func(t *testing.T) {
		if _, err := w.svc.Create(ctx, w.adv, identity.Advertiser, links.NewLink{ProgramID: w.program}); !errors.Is(err, links.ErrAffiliatesOnly) {
			t.Fatalf("err %v", err)
		}
	})
	t.Run("another affiliate cannot use this partnership", func(t *testing.T) {
		_, err := w.svc.Create(ctx, w.otherAff, identity.Affiliate, links.NewLink{ProgramID: w.program})
		var na *links.NotApprovedError
		if !errors.As(err, &na) || na.Status != "none" {
			t.Fatalf("err %v", err)
		}
	})
}

func TestCreateValidatesPromotionDestinationAndSubs(t *testing.T) {
	w := newWorld(t)
	otherProgram := linkstest.Program(t, w.db, w.adv, "https://other.example.test/", "")
	past := time.Now().Add(-time.Hour)
	ownPromo := linkstest.Promotion(t, w.db, w.program, "https://shop.example.test/sale", nil, nil)
	foreignPromo := linkstest.Promotion(t, w.db, otherProgram, "", nil, nil)
	endedPromo := linkstest.Promotion(t, w.db, w.program, "", nil, &past)
	long := strings.Repeat("é", links.MaxSubLen)
	cases := []struct {
		name  string
		in    links.NewLink
		field string // "" when valid
	}{
		{"a promotion of the program is fine", links.NewLink{PromotionID: ownPromo}, ""},
		{"a promotion of another program is refused", links.NewLink{PromotionID: foreignPromo}, "promotion_id"},
		{"an ended promotion is refused", links.NewLink{PromotionID: endedPromo}, "promotion_id"},
		{"an unknown promotion is refused", links.NewLink{PromotionID: "prm_00000000000000000000000000"}, "promotion_id"},
		{"a malformed promotion id is refused", links.NewLink{PromotionID: "nope"}, "promotion_id"},
		{"a destination on the landing host is fine", links.NewLink{DestinationURL: "https://shop.example.test/shoes?x=1"}, ""},
		{"a destination on a subdomain is fine", links.NewLink{DestinationURL: "http://m.shop.example.test/"}, ""},
		{"the host is compared without case", links.NewLink{DestinationURL: "https://SHOP.example.test/"}, ""},
		{"another host is refused", links.NewLink{DestinationURL: "https://evil.test/"}, "destination_url"},
		{"a look-alike suffix is refused", links.NewLink{DestinationURL: "https://shop.example.test.evil.test/"}, "destination_url"},
		{"a look-alike prefix is refused", links.NewLink{DestinationURL: "https://notshop.example.test/"}, "destination_url"},
		{"a parent domain is refused", links.NewLink{DestinationURL: "https://example.test/"}, "destination_url"},
		{"a non-http scheme is refused", links.NewLink{DestinationURL: "javascript:alert(1)"}, "destination_url"},
		{"a relative URL is refused", links.NewLink{DestinationURL: "/shoes"}, "destination_url"},
		{"credentials are refused", links.NewLink{DestinationURL: "https://u:p@shop.example.test/"}, "destination_url"},
		{"a 2049-character URL is refused", links.NewLink{DestinationURL: "https://shop.example.test/" + strings.Repeat("a", 2049-26)}, "destination_url"},
		{"255-character subs are fine", links.NewLink{Subs: [5]string{long, long, long, long, long}}, ""},
		{"a 256-character sub is refused", links.NewLink{Subs: [5]string{"", "", "", "", long + "x"}}, "sub5"},
		{"a sub with CR/LF is refused", links.NewLink{Subs: [5]string{"a\r\nb"}}, "sub1"},
		{"a sub with another control character is refused", links.NewLink{Subs: [5]string{"", "", "a\u0007b"}}, "sub3"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.in.ProgramID = w.program
			l, err := w.svc.Create(context.Background(), w.aff, identity.Affiliate, c.in)
			if c.field == "" {
				if err != nil {
					t.Fatalf("err %v", err)
				}
				if c.in.PromotionID != "" && (l.PromotionID == nil || *l.PromotionID != c.in.PromotionID) {
					t.Fatalf("promotion %v", l.PromotionID)
				}
				if c.in.DestinationURL != "" && (l.DestinationURL == nil || *l.DestinationURL != c.in.DestinationURL) {
					t.Fatalf("destination %v", l.DestinationURL)
				}
				return
			}
			var ve *links.ValidationError
			if !errors.As(err, &ve) || len(ve.Fields) != 1 || ve.Fields[0].Field != c.field {
				t.Fatalf("err %v, want a validation error on %s", err, c.field)
			}
		})
	}
}

func TestListIsScopedToTheCallersCompany(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	second := linkstest.Program(t, w.db, w.adv, "https://two.example.test/", "")
	linkstest.Partnership(t, w.db, second, w.aff, "approved")
	var made []string
	for i := range 5 {
		program := w.program
		if i%2 == 1 {
			program = second
		}
		made = append(made, w.create(t, links.NewLink{ProgramID: program}).ID)
	}
	// Another advertiser's program and its affiliate's link must never show up.
	otherAdv := linkstest.Company(t, w.db, identity.Advertiser)
	otherProgram := linkstest.Program(t, w.db, otherAdv, "https://else.example.test/", "")
	linkstest.Partnership(t, w.db, otherProgram, w.otherAff, "approved")
	if _, err := w.svc.Create(ctx, w.otherAff, identity.Affiliate, links.NewLink{ProgramID: otherProgram}); err != nil {
		t.Fatal(err)
	}

	all := func(company, kind string, f links.Filter) []string {
		var out []string
		p := page.Request{Limit: 2}
		for {
			got, next, err := w.svc.List(ctx, company, kind, f, p)
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range got {
				out = append(out, l.ID)
			}
			if next == "" {
				return out
			}
			if p, err = page.Parse("2", next); err != nil {
				t.Fatal(err)
			}
		}
	}
	newestFirst := []string{made[4], made[3], made[2], made[1], made[0]}
	cases := []struct {
		name    string
		company string
		kind    string
		filter  links.Filter
		want    []string
	}{
		{"the affiliate sees its links newest first across pages", w.aff, identity.Affiliate, links.Filter{}, newestFirst},
		{"the advertiser sees the links of its programs", w.adv, identity.Advertiser, links.Filter{}, newestFirst},
		{"a program filter keeps that program's links", w.aff, identity.Affiliate, links.Filter{ProgramID: second}, []string{made[3], made[1]}},
		{"another advertiser sees none of them", otherAdv, identity.Advertiser, links.Filter{ProgramID: w.program}, nil},
		{"another affiliate sees only its own", w.otherAff, identity.Affiliate, links.Filter{ProgramID: w.program}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := all(c.company, c.kind, c.filter)
			if strings.Join(got, ",") != strings.Join(c.want, ",") {
				t.Fatalf("got %v\nwant %v", got, c.want)
			}
		})
	}
}

func TestPauseAndResumeAreTheOwnersAndAnnounced(t *testing.T) {
	w := newWorld(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	var payloads []string
	pgtest.Listen(t, w.db, pgstore.Subscription{Channel: links.ChangedChannel, Notify: func(p string) {
		mu.Lock()
		payloads = append(payloads, p)
		mu.Unlock()
	}, Reset: func() {}})

	l := w.create(t, links.NewLink{ProgramID: w.program})
	if _, err := w.svc.SetStatus(ctx, w.otherAff, identity.Affiliate, l.ID, links.Paused); !errors.Is(err, links.ErrNotFound) {
		t.Fatalf("another affiliate paused it: %v", err)
	}
	if _, err := w.svc.SetStatus(ctx, w.adv, identity.Advertiser, l.ID, links.Paused); !errors.Is(err, links.ErrAffiliatesOnly) {
		t.Fatalf("the advertiser paused it: %v", err)
	}
	got, err := w.svc.SetStatus(ctx, w.aff, identity.Affiliate, l.ID, links.Paused)
	if err != nil || got.Status != links.Paused {
		t.Fatalf("pause: %+v %v", got, err)
	}
	if tg, err := w.svc.Resolve(ctx, l.Code); err != nil || tg.Redirects() {
		t.Fatalf("a paused link resolves to %+v %v", tg, err)
	}
	if got, err = w.svc.SetStatus(ctx, w.aff, identity.Affiliate, l.ID, links.Active); err != nil || got.Status != links.Active {
		t.Fatalf("resume: %+v %v", got, err)
	}
	deadline := time.Now().Add(3 * time.Second)
	for {
		mu.Lock()
		n := len(payloads)
		mu.Unlock()
		if n >= 3 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	// Create, pause, resume; the refused attempts announce nothing.
	if strings.Join(payloads, ",") != strings.Join([]string{l.Code, l.Code, l.Code}, ",") {
		t.Fatalf("notifications %v, want the code three times", payloads)
	}
}

func TestResolveReturnsEverythingTheRedirectNeeds(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	promo := linkstest.Promotion(t, w.db, w.program, "https://shop.example.test/sale", &start, nil)
	l := w.create(t, links.NewLink{ProgramID: w.program, PromotionID: promo, DestinationURL: "https://shop.example.test/d",
		Subs: [5]string{"a", "b", "c", "d", "e"}})
	got, err := w.svc.Resolve(ctx, l.Code)
	if err != nil {
		t.Fatal(err)
	}
	want := links.Target{LinkID: l.ID, Code: l.Code, ProgramID: w.program, PartnershipID: w.partnership, AffiliateID: w.aff,
		AdvertiserID: w.adv, PromotionID: promo, LinkStatus: "active", ProgramStatus: "active", PartnershipStatus: "approved",
		ClickParam: "ps_click_id", Subs: [5]string{"a", "b", "c", "d", "e"}, ProgramLandingURL: "https://shop.example.test/landing?lang=en",
		DestinationURL: "https://shop.example.test/d", PromotionLandingURL: "https://shop.example.test/sale"}
	if got.PromotionStartsAt == nil || !got.PromotionStartsAt.Equal(start) || got.PromotionEndsAt != nil {
		t.Fatalf("promotion window %v %v", got.PromotionStartsAt, got.PromotionEndsAt)
	}
	got.PromotionStartsAt = nil
	if got != want {
		t.Fatalf("got  %+v\nwant %+v", got, want)
	}
	if !got.Redirects() {
		t.Fatal("an active link does not redirect")
	}
	linkstest.SetPartnershipStatus(t, w.db, w.partnership, "suspended")
	if got, _ := w.svc.Resolve(ctx, l.Code); got.Redirects() {
		t.Fatal("a link of a suspended partnership redirects")
	}
	for _, code := range []string{"ZZZZZZZZZZZZ", "bad-code!", "short", strings.Repeat("a", 33)} {
		if _, err := w.svc.Resolve(ctx, code); !errors.Is(err, links.ErrNotFound) {
			t.Fatalf("Resolve(%q) = %v, want ErrNotFound", code, err)
		}
	}
}
