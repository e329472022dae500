package conversions_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/partnerstream/partnerstream/internal/conversions"
	"github.com/partnerstream/partnerstream/internal/events"
	"github.com/partnerstream/partnerstream/internal/fraud"
	"github.com/partnerstream/partnerstream/internal/testenv/chtest"
)

// clickRow is a click as ingest stores it in ClickHouse, with what enrichment derived.
type clickRow struct {
	ip, visitor, country, device, referrer, paidAds string
	asn                                             uint32
	hosting                                         bool
}

// chEnv is env with a migrated ClickHouse that the service reads clicks from.
type chEnv struct {
	*env
	ch   driver.Conn
	chdb string
}

func newCHEnv(t *testing.T) *chEnv {
	t.Helper()
	e := newEnv(t)
	_, db, conn := chtest.Migrated(t)
	e.svc = conversions.New(e.db, conversions.Options{Now: e.clock.Now, ClickIDs: e.keys, Clicks: fraud.NewClickStore(conn, db)})
	return &chEnv{env: e, ch: conn, chdb: db}
}

// store writes click id's row to ClickHouse as ingest would.
func (e *chEnv) store(t *testing.T, program, affiliate, id string, r clickRow) {
	t.Helper()
	c, ok := e.keys.Verify(id)
	if !ok {
		t.Fatalf("%s does not verify", id)
	}
	hosting := uint8(0)
	if r.hosting {
		hosting = 1
	}
	ctx := context.Background()
	batch, err := e.ch.PrepareBatch(ctx, `INSERT INTO `+e.chdb+`.clicks (click_id, visitor, occurred_at, link_id, program_id,
		affiliate_id, advertiser_id, ip, country, asn, hosting, device_type, referrer_domain, paid_ads)`)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = batch.Close() }()
	if err := batch.Append(id, r.visitor, c.At.Truncate(time.Second), c.LinkID, program, affiliate, e.adv,
		r.ip, r.country, r.asn, hosting, r.device, r.referrer, r.paidAds); err != nil {
		t.Fatal(err)
	}
	if err := batch.Send(); err != nil {
		t.Fatal(err)
	}
}

func (e *chEnv) registerClick(t *testing.T, program, id, externalID string) conversions.Conversion {
	t.Helper()
	c, created, err := e.svc.Register(context.Background(), e.adv, conversions.NewConversion{ClickID: id, ExternalID: externalID,
		Amount: "100.00", OccurredAt: e.clock.Now(), ProgramID: program})
	if err != nil || !created {
		t.Fatalf("Register: %v (created %v)", err, created)
	}
	return c
}

// decide runs one pass of the click loop and wants it to settle n conversions.
func (e *chEnv) decide(t *testing.T, n int) {
	t.Helper()
	if got, err := e.svc.DecideClicks(context.Background()); err != nil || got != n {
		t.Fatalf("DecideClicks settled %d, want %d: %v", got, n, err)
	}
}

// Each click-stage rule fires once the click loop reads the click from ClickHouse, and not on
// the other side of its boundary; the click's country and device type go with the conversion
// and every event after.
func TestEachClickRuleFiresOnceTheClickIsKnown(t *testing.T) {
	e := newCHEnv(t)
	program, _ := e.programWithRules(t, map[string]fraud.Change{
		fraud.HostingNetwork:    {Action: ptr(fraud.ActionHold)},
		fraud.CountryNotAllowed: {Enabled: ptr(true), Params: map[string]any{"countries": []string{"DE", "AT"}}},
		fraud.ClickVelocity:     {Params: map[string]any{"max_clicks": int64(2), "window_seconds": int64(60)}},
		fraud.BannedReferrer:    {Params: map[string]any{"patterns": []string{"*.coupons.example"}}},
		fraud.PaidAdsClick:      {Params: map[string]any{"allowed": []string{"gclid"}}},
		fraud.CustomRule:        {Enabled: ptr(true), Params: map[string]any{"expression": `device == "tablet" && amount >= 100.0`}},
	})
	now := e.clock.Now()
	honest := clickRow{country: "DE", device: "desktop", referrer: "blog.example"}
	cases := []struct {
		name    string
		row     clickRow
		earlier []time.Duration // other clicks of the link from the same address, this long before the click
		want    []string
		held    bool
	}{
		{name: "an honest click fires nothing", row: honest},
		{name: "a click from a data centre is held with its AS", row: clickRow{country: "DE", device: "desktop", hosting: true, asn: 16509},
			want: []string{fraud.HostingNetwork}, held: true},
		{name: "a click from a country outside the list is flagged", row: clickRow{country: "FR", device: "desktop"}, want: []string{fraud.CountryNotAllowed}},
		{name: "a third click from one address within the window is flagged", row: clickRow{ip: "198.51.100.0", country: "DE"},
			earlier: []time.Duration{10 * time.Second, 59 * time.Second}, want: []string{fraud.ClickVelocity}},
		{name: "a second one within the window and one outside it are not", row: clickRow{ip: "198.51.101.0", country: "DE"},
			earlier: []time.Duration{10 * time.Second, 61 * time.Second}},
		{name: "a paid-ads click id the program does not allow is flagged", row: clickRow{country: "AT", paidAds: "gclid,fbclid"}, want: []string{fraud.PaidAdsClick}},
		{name: "one it allows is not", row: clickRow{country: "AT", paidAds: "gclid"}},
		{name: "a referrer under a banned pattern is flagged", row: clickRow{country: "DE", referrer: "deals.coupons.example"}, want: []string{fraud.BannedReferrer}},
		{name: "the custom rule fires when its expression holds", row: clickRow{country: "DE", device: "tablet"}, want: []string{fraud.CustomRule}},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			at := now.Add(-time.Hour)
			id := e.click(t, program, e.aff, at)
			e.store(t, program, e.aff, id, c.row)
			for _, d := range c.earlier {
				e.store(t, program, e.aff, e.click(t, program, e.aff, at.Add(-d)), clickRow{ip: c.row.ip})
			}
			registered := e.registerClick(t, program, id, "click-rule-"+string(rune('a'+i)))
			if registered.Country != "" || len(registered.Commission.Findings) != 0 {
				t.Fatalf("registration decided the click: %+v", registered)
			}
			e.decide(t, 1)
			got := e.get(t, registered.ID)
			acting, _ := codes(got)
			if !slices.Equal(acting, c.want) || (got.Commission.HeldAt != nil) != c.held {
				t.Fatalf("fired %v (held %v), want %v (held %v)", acting, got.Commission.HeldAt != nil, c.want, c.held)
			}
			if got.Country != c.row.country || got.DeviceType != c.row.device {
				t.Errorf("country %q device %q, want %q %q", got.Country, got.DeviceType, c.row.country, c.row.device)
			}
			if !c.held {
				// A later decision's events carry the click's country and device, and the flags.
				if _, err := e.svc.ChangeStatus(context.Background(), e.adv, got.ID, conversions.Rejected, ""); err != nil {
					t.Fatal(err)
				}
			}
			evs := e.outboxFor(t, got.ID)
			if evs[0].data.Country != "" || evs[0].envelope.Type != events.ConversionCreated {
				t.Errorf("conversion.created knew the click: %+v", evs[0].data)
			}
			last := evs[len(evs)-1]
			if want := map[bool]string{true: events.CommissionHeld, false: events.CommissionStatusChanged}[c.held]; last.envelope.Type != want {
				t.Errorf("last event %s, want %s", last.envelope.Type, want)
			}
			if last.data.Country != c.row.country || last.data.DeviceType != c.row.device || !slices.Equal(last.data.Risk.ReasonCodes(), c.want) {
				t.Errorf("%s carries %q %q %v", last.envelope.Type, last.data.Country, last.data.DeviceType, last.data.Risk.ReasonCodes())
			}
		})
	}
}

// A conversion whose click ClickHouse does not have yet waits for it: the click loop decides
// it when the click arrives, and its hold and its country come then.
func TestAClickThatArrivesLateIsDecidedThen(t *testing.T) {
	e := newCHEnv(t)
	program, _ := e.programWithRules(t, map[string]fraud.Change{fraud.HostingNetwork: {Action: ptr(fraud.ActionHold)}})
	id := e.click(t, program, e.aff, e.clock.Now().Add(-time.Minute))
	c := e.registerClick(t, program, id, "late-1")
	if c.Country != "" || c.Commission.HeldAt != nil || len(c.Commission.Findings) != 0 {
		t.Fatalf("registered with %q %+v", c.Country, c.Commission)
	}
	e.decide(t, 0)
	e.store(t, program, e.aff, id, clickRow{country: "NL", device: "mobile", hosting: true, asn: 14061})
	e.decide(t, 1)
	got := e.get(t, c.ID)
	if got.Country != "NL" || got.DeviceType != "mobile" || got.Commission.HeldAt == nil || !slices.Equal(codesOf(got), []string{fraud.HostingNetwork}) ||
		got.Commission.Findings[0].Observed != "AS14061" || got.Commission.Findings[0].Stage != fraud.StageClick {
		t.Fatalf("after the click: %q %q %+v", got.Country, got.DeviceType, got.Commission)
	}
	evs := e.outboxFor(t, c.ID)
	last := evs[len(evs)-1]
	if evs[0].data.Country != "" || last.envelope.Type != events.CommissionHeld || last.data.Country != "NL" || last.data.DeviceType != "mobile" ||
		!last.data.Risk.Held || !slices.Equal(last.data.Risk.ReasonCodes(), []string{fraud.HostingNetwork}) {
		t.Fatalf("events %+v", evs)
	}
	// Settled once: the next pass finds nothing to do.
	e.decide(t, 0)

	// A click that never comes is given up after MaxClickWait, with nothing decided.
	never := e.registerClick(t, program, e.click(t, program, e.aff, e.clock.Now().Add(-time.Minute)), "late-2")
	e.clock.Advance(conversions.MaxClickWait - time.Second)
	e.decide(t, 0)
	e.clock.Advance(2 * time.Second)
	e.decide(t, 1)
	if got := e.get(t, never.ID); got.Country != "" || len(got.Commission.Findings) != 0 ||
		e.count(t, `SELECT count(*) FROM conversions WHERE click_pending`) != 0 {
		t.Fatalf("given up: %+v", got)
	}
}

// A click rule in shadow decides and records, and changes nothing: no hold, no risk in the
// events; so does a rule switched off for the partnership, which records nothing at all.
func TestAShadowClickRuleChangesNothing(t *testing.T) {
	e := newCHEnv(t)
	program, ptn := e.programWithRules(t, map[string]fraud.Change{
		fraud.HostingNetwork: {Action: ptr(fraud.ActionHold), Shadow: ptr(true)},
		fraud.PaidAdsClick:   {Action: ptr(fraud.ActionHold)},
	})
	if _, err := fraud.New(e.db, e.clock.Now).SetExemptions(context.Background(), e.adv, ptn, []string{fraud.PaidAdsClick}); err != nil {
		t.Fatal(err)
	}
	id := e.click(t, program, e.aff, e.clock.Now().Add(-time.Hour))
	e.store(t, program, e.aff, id, clickRow{country: "US", device: "desktop", hosting: true, asn: 16509, paidAds: "msclkid"})
	c := e.registerClick(t, program, id, "shadow-1")
	e.decide(t, 1)
	c = e.get(t, c.ID)
	acting, shadow := codes(c)
	if c.Commission.HeldAt != nil || len(acting) != 0 || !slices.Equal(shadow, []string{fraud.HostingNetwork}) {
		t.Fatalf("acting %v shadow %v held %v", acting, shadow, c.Commission.HeldAt)
	}
	if _, err := e.svc.ChangeStatus(context.Background(), e.adv, c.ID, conversions.Approved, ""); err != nil {
		t.Fatal(err)
	}
	for _, ev := range e.outboxFor(t, c.ID) {
		if ev.data.Risk != nil || ev.data.Status == conversions.Approved && ev.data.Country != "US" {
			t.Fatalf("%s carries %+v", ev.envelope.Type, ev.data)
		}
	}
}
