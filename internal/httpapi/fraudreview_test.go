package httpapi_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/partnerstream/partnerstream/internal/fraud"
	"github.com/partnerstream/partnerstream/internal/fraudreview"
	"github.com/partnerstream/partnerstream/internal/httpapi"
	"github.com/partnerstream/partnerstream/internal/identity"
	"github.com/partnerstream/partnerstream/internal/ids"
)

func TestTheFraudReviewRoutesAreDocumented(t *testing.T) {
	assertAreaDocumented(t, func(s *httpapi.Server) { s.MountFraudReview(httpapi.FraudReview{}) }, "openapi/27-fraud-review.yaml")
}

type queueAnswer struct {
	Data []struct {
		ID    string `json:"id"`
		Click *struct {
			Country string    `json:"country"`
			At      time.Time `json:"at"`
		} `json:"click"`
		Risk struct {
			Held bool `json:"held"`
		} `json:"risk"`
	} `json:"data"`
	NextCursor string `json:"next_cursor"`
}

func (q queueAnswer) ids() []string {
	var out []string
	for _, d := range q.Data {
		out = append(out, d.ID)
	}
	return out
}

func TestTheReviewQueueListsFlaggedAndHeldCommissionsWithTheirClicks(t *testing.T) {
	f := newConversionsFixture(t)
	rules := fraud.New(f.db, nil)
	f.srv.MountFraud(rules)
	f.srv.MountFraudReview(httpapi.FraudReview{
		Queue:    fraudreview.Queue{Conversions: f.svc, Clicks: fraudreview.ClickHouseClicks{Conn: f.ch, Database: f.chDB}},
		Backtest: fraudreview.Backtest{Conn: f.ch, Database: f.chDB}, Rules: rules})
	member, owner := f.dashboardAs(t, "advertiser", "member"), f.dashboardAs(t, "advertiser", "owner")
	if r := f.do(t, "PATCH", "/api/programs/"+f.program+"/fraud-rules", owner,
		`{"rules": {"conversion_too_fast": {"action": "hold", "params": {"min_seconds": 30}}}}`); r.status != 200 {
		t.Fatalf("PATCH rules: %d %s", r.status, r.raw)
	}
	register := func(click, external, email string) string {
		t.Helper()
		r := f.do(t, "POST", "/api/v1/conversions", apiKey(f.adv), fmt.Sprintf(`{"click_id": %q, "external_id": %q, "amount": "50.00"%s}`,
			click, external, email))
		if r.status != 201 {
			t.Fatalf("register %s: %d %s", external, r.status, r.raw)
		}
		return decode[conversion](t, r).ID
	}
	clickedAt := time.Now().Add(-2 * time.Second)
	held := register(f.clicks(t, f.program, clickedAt, 1)[0], "fast", "")
	flagged := register(f.clicks(t, f.program, time.Now().Add(-time.Hour), 1)[0], "disposable", `, "customer_email": "x@mailinator.com"`)
	register(f.clicks(t, f.program, time.Now().Add(-time.Hour), 1)[0], "honest", "")

	q := decode[queueAnswer](t, f.do(t, "GET", "/api/fraud/queue", member, ""))
	if !slices.Equal(q.ids(), []string{flagged, held}) {
		t.Fatalf("the queue lists %v, want the flagged %s and the held %s, newest first", q.ids(), flagged, held)
	}
	if c := q.Data[1].Click; c == nil || c.Country != "ES" || c.At.Unix() != clickedAt.Unix() || !q.Data[1].Risk.Held {
		t.Errorf("the held conversion's evidence %+v, risk %+v", c, q.Data[1].Risk)
	}
	for _, tc := range []struct {
		query string
		want  []string
	}{
		{"state=held", []string{held}},
		{"state=flagged", []string{flagged}},
		{"code=disposable_email", []string{flagged}},
		{"code=conversion_too_fast&state=flagged", nil},
		{"program_id=" + f.program + "&affiliate_id=" + f.affID, []string{flagged, held}},
		{"from=" + time.Now().Add(time.Hour).Format(time.RFC3339), nil},
	} {
		r := f.do(t, "GET", "/api/fraud/queue?"+tc.query, member, "")
		if got := decode[queueAnswer](t, r).ids(); r.status != 200 || !slices.Equal(got, tc.want) {
			t.Errorf("%s: %d %v, want %v", tc.query, r.status, got, tc.want)
		}
	}
	first := decode[queueAnswer](t, f.do(t, "GET", "/api/fraud/queue?limit=1", member, ""))
	second := decode[queueAnswer](t, f.do(t, "GET", "/api/fraud/queue?limit=1&cursor="+first.NextCursor, member, ""))
	if !slices.Equal(first.ids(), []string{flagged}) || !slices.Equal(second.ids(), []string{held}) || second.NextCursor != "" {
		t.Errorf("pages %v (%q) then %v (%q)", first.ids(), first.NextCursor, second.ids(), second.NextCursor)
	}

	// Bad filters name the parameter; an affiliate has no queue, another advertiser an empty one.
	for query, field := range map[string]string{"state=suspicious": "state", "code=click_bot": "code", "program_id=nope": "program_id",
		"from=yesterday": "from"} {
		if r := f.do(t, "GET", "/api/fraud/queue?"+query, member, ""); r.status != 400 || !slices.Equal(fields(r.problem), []string{field}) {
			t.Errorf("%s: %d %s, want 400 naming %s", query, r.status, r.raw, field)
		}
	}
	if r := f.do(t, "GET", "/api/fraud/queue", f.dashboardAs(t, "affiliate", "owner"), ""); r.status != 403 {
		t.Errorf("an affiliate reads a queue: %d %s", r.status, r.raw)
	}
	other, _ := f.company(t, identity.Advertiser)
	if r := f.do(t, "GET", "/api/fraud/queue", f.session(t, other, identity.Advertiser, "owner"), ""); r.status != 200 ||
		len(decode[queueAnswer](t, r).Data) != 0 {
		t.Errorf("another advertiser's queue: %d %s", r.status, r.raw)
	}

	// Released, the held commission leaves the held queue.
	if r := f.do(t, "POST", "/api/conversions/release", member, fmt.Sprintf(`{"ids": [%q]}`, held)); r.status != 200 {
		t.Fatalf("release: %d %s", r.status, r.raw)
	}
	if got := decode[queueAnswer](t, f.do(t, "GET", "/api/fraud/queue?state=held", member, "")).ids(); len(got) != 0 {
		t.Errorf("held after the release: %v", got)
	}
}

func TestABacktestRefusesBadInputNamingTheField(t *testing.T) {
	f := newConversionsFixture(t)
	rules := fraud.New(f.db, nil)
	f.srv.MountFraudReview(httpapi.FraudReview{Backtest: fraudreview.Backtest{Conn: f.ch, Database: f.chDB}, Rules: rules})
	member := f.dashboardAs(t, "advertiser", "member")
	for _, tc := range []struct {
		name, body string
		fields     []string
	}{
		{"unknown reason code", `{"from": "2026-10-01", "to": "2026-10-31", "rules": {"click_bot": {"enabled": true}}}`, []string{"rules.click_bot"}},
		{"window out of range", `{"from": "2026-10-01", "to": "2026-10-31", "rules": {"conversion_too_fast": {"params": {"min_seconds": 0}}}}`,
			[]string{"rules.conversion_too_fast.params.min_seconds"}},
		{"not a number", `{"from": "2026-10-01", "to": "2026-10-31", "rules": {"conversion_too_fast": {"params": {"min_seconds": "ten"}}}}`,
			[]string{"rules.conversion_too_fast.params.min_seconds"}},
		{"no period", `{"rules": {}}`, []string{"from", "to"}},
		{"a period too long", `{"from": "2026-01-01", "to": "2026-10-31"}`, []string{"to"}},
		{"to before from", `{"from": "2026-10-31", "to": "2026-10-01"}`, []string{"to"}},
		{"a malformed program", `{"from": "2026-10-01", "to": "2026-10-31", "program_id": "p1"}`, []string{"program_id"}},
	} {
		r := f.do(t, "POST", "/api/fraud/backtest", member, tc.body)
		if r.status != 400 || !slices.Equal(fields(r.problem), tc.fields) {
			t.Errorf("%s: %d %s, want 400 naming %v", tc.name, r.status, r.raw, tc.fields)
		}
	}
	other, _ := f.company(t, identity.Advertiser)
	if r := f.do(t, "POST", "/api/fraud/backtest", f.session(t, other, identity.Advertiser, "owner"),
		`{"from": "2026-10-01", "to": "2026-10-31", "program_id": "`+f.program+`"}`); r.status != 404 {
		t.Errorf("another advertiser's program: %d %s", r.status, r.raw)
	}
	r := f.do(t, "POST", "/api/fraud/backtest", member, `{"from": "2026-10-01", "to": "2026-10-31", "program_id": "`+f.program+`",
		"rules": {"conversion_too_slow": {"enabled": true, "shadow": true}}}`)
	if r.status != 200 {
		t.Fatalf("a backtest: %d %s", r.status, r.raw)
	}
}

func TestABacktestAppliesThePartnershipsExemptions(t *testing.T) {
	f := newConversionsFixture(t)
	ctx := context.Background()
	rules := fraud.New(f.db, nil)
	f.srv.MountFraudReview(httpapi.FraudReview{Backtest: fraudreview.Backtest{Conn: f.ch, Database: f.chDB}, Rules: rules})
	member := f.dashboardAs(t, "advertiser", "member")
	// A conversion 2 seconds after its click, as ingest stores it.
	clicked := time.Date(2026, 10, 5, 9, 0, 0, 0, time.UTC)
	click := f.clicks(t, f.program, clicked, 1)[0]
	batch, err := f.ch.PrepareBatch(ctx, "INSERT INTO "+f.chDB+`.conversion_changes (conversion_id, version, sign, status, type,
		currency, amount, commission, occurred_at, advertiser_id, program_id, affiliate_id, click_id, commission_id, ingested_at)`)
	if err != nil {
		t.Fatal(err)
	}
	if err := batch.Append(ids.New(ids.Conversion), uint64(1), int8(1), "pending", "sale", "EUR", int64(10_000), int64(1_000),
		clicked.Add(2*time.Second), f.advID, f.program, f.affID, click, "", clicked); err != nil {
		t.Fatal(err)
	}
	if err := batch.Send(); err != nil {
		t.Fatal(err)
	}
	held := func() int64 {
		t.Helper()
		r := f.do(t, "POST", "/api/fraud/backtest", member, `{"from": "2026-10-01", "to": "2026-10-31", "program_id": "`+f.program+`",
			"rules": {"conversion_too_fast": {"action": "hold"}}}`)
		if r.status != 200 {
			t.Fatalf("a backtest: %d %s", r.status, r.raw)
		}
		return decode[struct {
			Held struct {
				Conversions int64 `json:"conversions"`
			} `json:"held"`
		}](t, r).Held.Conversions
	}
	if n := held(); n != 1 {
		t.Fatalf("held %d conversions, want the one", n)
	}
	var ptn string
	if err := f.db.QueryRow(ctx, `SELECT id FROM partnerships WHERE program_id = $1`, f.program).Scan(&ptn); err != nil {
		t.Fatal(err)
	}
	if _, err := rules.SetExemptions(ctx, f.advID, ptn, []string{fraud.ConversionTooFast}); err != nil {
		t.Fatal(err)
	}
	if n := held(); n != 0 {
		t.Errorf("held %d conversions of a partnership exempt from the rule", n)
	}
}
