package fraudreview_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/partnerstream/partnerstream/internal/clickid"
	"github.com/partnerstream/partnerstream/internal/conversions"
	"github.com/partnerstream/partnerstream/internal/fraud"
	"github.com/partnerstream/partnerstream/internal/fraudreview"
	"github.com/partnerstream/partnerstream/internal/identity"
	"github.com/partnerstream/partnerstream/internal/ids"
	"github.com/partnerstream/partnerstream/internal/testenv"
	"github.com/partnerstream/partnerstream/internal/testenv/pgtest"
)

// shop is an advertiser with a program in EUR (10 %) whose conversions less than 30 seconds
// after their click are held.
type shop struct {
	db      *pgxpool.Pool
	cnv     *conversions.Service
	keys    clickid.Keys
	adv     string
	owner   string
	program string
}

func newShop(t *testing.T, db *pgxpool.Pool, now func() time.Time) *shop {
	t.Helper()
	ctx := context.Background()
	keys, err := clickid.ParseKeys(clickid.GenerateKeySpec())
	if err != nil {
		t.Fatal(err)
	}
	s := &shop{db: db, keys: keys, cnv: conversions.New(db, conversions.Options{ClickIDs: keys, Now: now}), program: ids.New(ids.Program)}
	s.owner = ids.New("usr") + "@shop.test"
	co, _, err := identity.NewStore(db).CreateCompany(ctx, identity.NewCompany{Kind: identity.Advertiser, Name: "Shop", OwnerEmail: s.owner})
	if err != nil {
		t.Fatal(err)
	}
	s.adv = co.ID
	if _, err := db.Exec(ctx, `INSERT INTO programs (id, advertiser_id, name, landing_url, currency, commission_type, commission_value)
		VALUES ($1, $2, 'p', 'https://shop.example/', 'EUR', 'percent', 1000)`, s.program, s.adv); err != nil {
		t.Fatal(err)
	}
	if _, err := fraud.New(db, nil).Update(ctx, s.adv, s.program, map[string]fraud.Change{
		fraud.ConversionTooFast: {Action: ptr(fraud.ActionHold), Params: map[string]any{"min_seconds": int64(30)}}}); err != nil {
		t.Fatal(err)
	}
	return s
}

// partner approves a new affiliate named name, with a link, and returns the link.
func (s *shop) partner(t *testing.T, name string) string {
	t.Helper()
	ctx := context.Background()
	co, _, err := identity.NewStore(s.db).CreateCompany(ctx, identity.NewCompany{Kind: identity.Affiliate, Name: name,
		OwnerEmail: ids.New("usr") + "@partner.test"})
	if err != nil {
		t.Fatal(err)
	}
	ptn, link := ids.New(ids.Partnership), ids.New(ids.Link)
	if _, err := s.db.Exec(ctx, `INSERT INTO partnerships (id, program_id, affiliate_id, advertiser_id, status) VALUES ($1, $2, $3, $4, 'approved')`,
		ptn, s.program, co.ID, s.adv); err != nil {
		t.Fatal(err)
	}
	if _, err := s.db.Exec(ctx, `INSERT INTO tracking_links (id, code, partnership_id, program_id, affiliate_id, advertiser_id)
		VALUES ($1, $2, $3, $4, $5, $6)`, link, fmt.Sprintf("%016x", time.Now().UnixNano()), ptn, s.program, co.ID, s.adv); err != nil {
		t.Fatal(err)
	}
	return link
}

// sell registers a sale of 50 EUR after seconds from its click on link.
func (s *shop) sell(t *testing.T, link string, at time.Time, seconds int) conversions.Conversion {
	t.Helper()
	click, err := s.keys.Mint(link, at.Add(-time.Duration(seconds)*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	c, _, err := s.cnv.Register(context.Background(), s.adv, conversions.NewConversion{ClickID: click, ExternalID: ids.New("ord"),
		Amount: "50.00", OccurredAt: at})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestTheDailySummaryTellsTheAdminsOnceADayWhatWasHeld(t *testing.T) {
	_, db := pgtest.Migrated(t)
	ctx := context.Background()
	clock := testenv.NewClock()
	clock.Set(time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC))
	s := newShop(t, db, clock.Now)
	admin, member := ids.New("usr")+"@shop.test", ids.New("usr")+"@shop.test"
	for _, u := range []struct{ email, role, locale string }{{admin, "admin", "es"}, {member, "member", "en"}} {
		if _, err := db.Exec(ctx, `INSERT INTO users (id, company_id, email, role, locale) VALUES ($1, $2, $3, $4, $5)`,
			ids.New(ids.User), s.adv, u.email, u.role, u.locale); err != nil {
			t.Fatal(err)
		}
	}
	fast, slow := s.partner(t, "Fast Deals"), s.partner(t, "Slow Savings")
	for range 3 {
		s.sell(t, fast, clock.Now(), 2)
	}
	s.sell(t, slow, clock.Now(), 5)
	s.sell(t, slow, clock.Now(), 600) // not held
	// A shop with nothing held is not told.
	quiet := newShop(t, db, clock.Now)
	quiet.sell(t, quiet.partner(t, "Honest"), clock.Now(), 600)

	m, inbox := testenv.SMTPMailer(t)
	clock.Advance(3 * time.Hour)
	sum := fraudreview.Summary{DB: db, Mailer: m, BaseURL: "https://partners.example", Now: clock.Now}
	var wg sync.WaitGroup
	sent := make([]int64, 2)
	for i := range sent { // two api replicas at once
		wg.Go(func() {
			n, err := sum.Send(ctx)
			if err != nil {
				t.Error(err)
			}
			sent[i] = n
		})
	}
	wg.Wait()
	if sent[0]+sent[1] != 1 {
		t.Errorf("summaries sent by the two replicas: %v, want one in all", sent)
	}
	en := inbox.Wait(t, s.owner, 5*time.Second)
	for _, want := range []string{"Fraud rules held 4 commissions in the last 24 hours", "conversion_too_fast: 4", "20.00 EUR (4)",
		"Fast Deals: 3", "Slow Savings: 1", "https://partners.example/app/review?state=held"} {
		if !strings.Contains(en.Text, want) {
			t.Errorf("the owner's summary lacks %q:\n%s", want, en.Text)
		}
	}
	if en.Subject != "PartnerStream held 4 commissions in the last day" {
		t.Errorf("subject %q", en.Subject)
	}
	if es := inbox.Wait(t, admin, 5*time.Second); !strings.Contains(es.Text, "Socios con más retenciones") {
		t.Errorf("the admin's summary in Spanish:\n%s", es.Text)
	}

	// Later the same day, a new hold: no second summary. The next day, with nothing held in
	// the last 24 hours, none either; a new hold then is told again.
	clock.Advance(time.Hour)
	s.sell(t, fast, clock.Now(), 1)
	if n, err := sum.Send(ctx); err != nil || n != 0 {
		t.Errorf("a second run the same day sent %d (%v)", n, err)
	}
	clock.Advance(25 * time.Hour)
	if n, err := sum.Send(ctx); err != nil || n != 0 {
		t.Errorf("a day without holds sent %d (%v)", n, err)
	}
	s.sell(t, fast, clock.Now(), 1)
	if n, err := sum.Send(ctx); err != nil || n != 1 {
		t.Errorf("a hold the next day sent %d (%v), want 1", n, err)
	}
	if got := inbox.Count(s.owner); got != 2 || inbox.Count(member) != 0 || inbox.Count(quiet.owner) != 0 {
		t.Errorf("e-mails: owner %d (want 2), member %d, the quiet shop's owner %d", got, inbox.Count(member), inbox.Count(quiet.owner))
	}
}
