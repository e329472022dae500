package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/partnerstream/partnerstream/internal/clickid"
	"github.com/partnerstream/partnerstream/internal/conversions"
	"github.com/partnerstream/partnerstream/internal/fraud"
	"github.com/partnerstream/partnerstream/internal/httpapi"
	"github.com/partnerstream/partnerstream/internal/identity"
	"github.com/partnerstream/partnerstream/internal/ids"
	"github.com/partnerstream/partnerstream/internal/rates"
	"github.com/partnerstream/partnerstream/internal/testenv/chtest"
)

// conversionsFixture is newFixture with the conversion, payout and postback routes mounted,
// ClickHouse for attribution, and a program in EUR (10 %) with the affiliate approved in it.
type conversionsFixture struct {
	*fixture
	svc     *conversions.Service
	keys    clickid.Keys // verify the signed click ids
	ch      driver.Conn
	chDB    string
	program string
}

func newConversionsFixture(t testing.TB) *conversionsFixture {
	t.Helper()
	f := &conversionsFixture{fixture: newFixture(t)}
	_, db, ch := chtest.Migrated(t)
	f.ch, f.chDB = ch, db
	keys, err := clickid.ParseKeys(clickid.GenerateKeySpec())
	if err != nil {
		t.Fatal(err)
	}
	f.keys = keys
	// The click-stage fraud rules read the clicks from ClickHouse, as the api does.
	f.svc = conversions.New(f.db, conversions.Options{ClickIDs: keys, Clicks: fraud.NewClickStore(ch, db)})
	f.srv.MountConversions(f.svc)
	f.srv.MountPayouts(f.svc)
	f.srv.MountConversionPostback(f.svc)
	f.program = f.newProgram(t, f.advID, "EUR")
	return f
}

// newProgram inserts a program (10 %) of advertiser with the fixture's affiliate approved.
func (f *conversionsFixture) newProgram(t testing.TB, advertiser, currency string) string {
	t.Helper()
	id := ids.New(ids.Program)
	ctx := context.Background()
	if _, err := f.db.Exec(ctx, `INSERT INTO programs (id, advertiser_id, name, landing_url, currency, commission_type,
		commission_value) VALUES ($1, $2, 'p', 'https://shop.example/', $3, 'percent', 1000)`, id, advertiser, currency); err != nil {
		t.Fatal(err)
	}
	if _, err := f.db.Exec(ctx, `INSERT INTO partnerships (id, program_id, affiliate_id, advertiser_id, status)
		VALUES ($1, $2, $3, $4, 'approved')`, ids.New(ids.Partnership), id, f.affID, advertiser); err != nil {
		t.Fatal(err)
	}
	return id
}

// clicks makes the signed ids of n clicks at a time on the fixture affiliate's link in
// program (the redirect's work), and records them in ClickHouse as ingest does.
func (f *conversionsFixture) clicks(t testing.TB, program string, at time.Time, n int) []string {
	t.Helper()
	ctx := context.Background()
	var advertiser string
	if err := f.db.QueryRow(ctx, `SELECT advertiser_id FROM programs WHERE id = $1`, program).Scan(&advertiser); err != nil {
		t.Fatal(err)
	}
	link := f.link(t, program)
	batch, err := f.ch.PrepareBatch(ctx, "INSERT INTO "+f.chDB+`.clicks (click_id, occurred_at, link_id, program_id,
		affiliate_id, advertiser_id, promotion_id, sub1, sub2, sub3, sub4, sub5, ip, user_agent, referrer, country,
		is_bot, is_duplicate, kafka_partition, kafka_offset)`)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = batch.Close() }()
	out := make([]string, n)
	for i := range out {
		if out[i], err = f.keys.Mint(link, at); err != nil {
			t.Fatal(err)
		}
		if err := batch.Append(out[i], at, link, program, f.affID, advertiser, "", "", "", "", "", "",
			// Visitors of their own (as ingest stores them, a /24 each), so click_velocity counts a few clicks each.
			fmt.Sprintf("10.%d.%d.0", i/256%256, i%256), "Mozilla/5.0", "", "ES", uint8(0), uint8(0), int32(0), int64(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := batch.Send(); err != nil {
		t.Fatal(err)
	}
	return out
}

// link inserts a tracking link of program for the fixture's affiliate.
func (f *conversionsFixture) link(t testing.TB, program string) string {
	t.Helper()
	id := ids.New(ids.Link)
	if _, err := f.db.Exec(context.Background(), `INSERT INTO tracking_links (id, code, partnership_id, program_id, affiliate_id, advertiser_id)
		SELECT $1, $2, id, program_id, affiliate_id, advertiser_id FROM partnerships WHERE program_id = $3 AND affiliate_id = $4`,
		id, strings.ToUpper(id[len(id)-12:]), program, f.affID); err != nil {
		t.Fatal(err)
	}
	return id
}

func (f *conversionsFixture) click(t testing.TB) string {
	t.Helper()
	return f.clicks(t, f.program, time.Now().Add(-time.Hour), 1)[0]
}

// register posts a sale of amount EUR for a fresh click and returns the conversion.
func (f *conversionsFixture) register(t *testing.T, externalID, amount string) conversion {
	t.Helper()
	r := f.do(t, "POST", "/api/v1/conversions", apiKey(f.adv),
		fmt.Sprintf(`{"click_id": %q, "external_id": %q, "amount": %q, "currency": "EUR", "metadata": {"coupon": "SPRING"}}`, f.click(t), externalID, amount))
	if r.status != 201 {
		t.Fatalf("register: %d %s", r.status, r.raw)
	}
	return decode[conversion](t, r)
}

// conversion is a conversion answer, with the fields the tests read; a pointer tells a
// missing field from an empty one.
type conversion struct {
	ID               string     `json:"id"`
	Amount           string     `json:"amount"`
	Currency         string     `json:"currency"`
	Source           string     `json:"source"`
	Attribution      string     `json:"attribution"`
	CouponCode       *string    `json:"coupon_code"`
	CustomerID       string     `json:"customer_id"`
	ClickID          *string    `json:"click_id"`
	ClickedAt        *string    `json:"clicked_at"`
	AffiliateID      string     `json:"affiliate_id"`
	OriginalAmount   *string    `json:"original_amount"`
	OriginalCurrency string     `json:"original_currency"`
	ExchangeRate     string     `json:"exchange_rate"`
	RateDate         string     `json:"rate_date"`
	ConvertedAmount  string     `json:"converted_amount"`
	Commission       commission `json:"commission"`
}

// commission is the commission of a conversion, or of a program's or partnership's terms.
type commission struct {
	ConversionID   string `json:"conversion_id"`
	Amount         string `json:"amount"`
	Currency       string `json:"currency"`
	Status         string `json:"status"`
	Reason         string `json:"reason"`
	Version        int    `json:"version"`
	OriginalAmount string `json:"original_amount"`
	ExchangeRate   string `json:"exchange_rate"`
}

// payoutAnswer is a payout answer.
type payoutAnswer struct {
	ID              string `json:"id"`
	Amount          string `json:"amount"`
	CommissionCount int    `json:"commission_count"`
	Status          string `json:"status"`
}

// postbackToken is the answer that makes a program's postback token.
type postbackToken struct {
	Token       string `json:"token"`
	PostbackURL string `json:"postback_url"`
}

// postbackAnswer is the answer of the postback URL.
type postbackAnswer struct {
	ID               string `json:"id"`
	Created          bool   `json:"created"`
	CommissionStatus string `json:"commission_status"`
	Attribution      string `json:"attribution"`
}

func TestRegisteringConversionsOverHTTP(t *testing.T) {
	f := newConversionsFixture(t)
	adv := apiKey(f.adv)
	clk := f.click(t)
	body := fmt.Sprintf(`{"click_id": %q, "external_id": "order-1", "type": "sale", "amount": "42.50", "currency": "EUR",
		"occurred_at": %q, "metadata": {"coupon": "SPRING"}}`, clk, time.Now().UTC().Format(time.RFC3339))
	first := f.do(t, "POST", "/api/v1/conversions", adv, body)
	made := decode[conversion](t, first)
	if first.status != 201 || made.Amount != "42.50" || made.Currency != "EUR" ||
		made.Commission.Amount != "4.25" || made.Commission.Status != "pending" ||
		first.header.Get("Location") != "/api/v1/conversions/"+made.ID {
		t.Fatalf("first: %d %s", first.status, first.raw)
	}
	repeat := f.do(t, "POST", "/api/v1/conversions", adv, strings.Replace(body, "42.50", "99.00", 1))
	if again := decode[conversion](t, repeat); repeat.status != 200 || again.ID != made.ID || again.Amount != "42.50" {
		t.Fatalf("repeat: %d %s", repeat.status, repeat.raw)
	}
	// A JSON number is read exactly, never through a float.
	num := f.do(t, "POST", "/api/v1/conversions", adv, fmt.Sprintf(`{"click_id": %q, "external_id": "n", "amount": 0.3}`, f.click(t)))
	if c := decode[conversion](t, num); num.status != 201 || c.Amount != "0.30" || c.Commission.Amount != "0.03" {
		t.Fatalf("a number amount: %d %s", num.status, num.raw)
	}

	other := f.newProgram(t, f.advID, "USD")
	young := ids.New(ids.Click)
	cases := []struct {
		name    string
		headers map[string]string
		body    string
		status  int
		code    string
	}{
		{"an affiliate key cannot register", apiKey(f.aff), fmt.Sprintf(`{"click_id": %q, "external_id": "x"}`, clk), 403, "advertiser_only"},
		{"a missing click id is invalid", adv, `{"external_id": "x"}`, 400, "validation_failed"},
		{"an unknown field is refused", adv, fmt.Sprintf(`{"click_id": %q, "external_id": "x", "amout": "1"}`, clk), 400, "invalid_json"},
		{"a bad occurred_at is invalid", adv, fmt.Sprintf(`{"click_id": %q, "external_id": "x", "occurred_at": "yesterday"}`, clk), 400, "validation_failed"},
		{"three decimals in EUR are invalid", adv, fmt.Sprintf(`{"click_id": %q, "external_id": "x", "amount": "1.005"}`, f.click(t)), 400, "validation_failed"},
		{"a malformed click id is invalid", adv, `{"click_id": "clk_123", "external_id": "x"}`, 400, "validation_failed"},
		{"occurred_at at the zero time is refused, not taken as now", adv, fmt.Sprintf(`{"click_id": %q, "external_id": "x", "occurred_at": "0001-01-01T00:00:00Z"}`, clk), 400, "validation_failed"},
		{"occurred_at a second before 1970 is refused", adv, fmt.Sprintf(`{"click_id": %q, "external_id": "x", "occurred_at": "1969-12-31T23:59:59Z"}`, clk), 400, "validation_failed"},
		{"an external id with CR/LF is refused", adv, fmt.Sprintf(`{"click_id": %q, "external_id": "o\r\nX-Forged: 1"}`, clk), 400, "validation_failed"},
		{"an external id with an escape is refused", adv, fmt.Sprintf(`{"click_id": %q, "external_id": "o\u001b[2J"}`, clk), 400, "validation_failed"},
		{"a customer id with CR/LF is refused", adv, fmt.Sprintf(`{"click_id": %q, "external_id": "x", "customer_id": "c\r\n1"}`, clk), 400, "validation_failed"},
		{"a repeated key is refused: the last one would win", adv, fmt.Sprintf(`{"click_id": %q, "external_id": "A", "external_id": "B", "amount": "1.00", "amount": "2.00"}`, clk), 400, "invalid_json"},
		{"a click from before the conversion's window is expired", adv, fmt.Sprintf(`{"click_id": %q, "external_id": "x", "occurred_at": %q}`,
			f.clicks(t, f.program, time.Now().Add(-40*24*time.Hour), 1)[0], time.Now().UTC().Format(time.RFC3339)), 422, "click_expired"},
		{"another currency without a rate is refused", adv, fmt.Sprintf(`{"click_id": %q, "external_id": "x", "currency": "USD"}`, f.click(t)), 422, "no_exchange_rate"},
		{"a click of another program keeps its currency", adv, fmt.Sprintf(`{"click_id": %q, "external_id": "x", "currency": "USD", "amount": "1"}`,
			f.clicks(t, other, time.Now().Add(-time.Minute), 1)[0]), 201, ""},
		{"a plain click id, as older versions made, is unknown: nothing waits for the click store", adv, fmt.Sprintf(`{"click_id": %q, "external_id": "x"}`, young), 422, "unknown_click"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := f.do(t, "POST", "/api/v1/conversions", c.headers, c.body)
			if r.status != c.status || (c.code != "" && r.problem.Code != c.code) {
				t.Fatalf("%d %s, want %d %s", r.status, r.raw, c.status, c.code)
			}
		})
	}
	// The all-zero id is well formed but its UUID is not a v7: a plain unknown click.
	zero := "clk_" + strings.Repeat("0", 22) + "7000"
	if r := f.do(t, "POST", "/api/v1/conversions", adv, fmt.Sprintf(`{"click_id": %q, "external_id": "z"}`, zero)); r.status != 422 || r.problem.Code != "unknown_click" {
		t.Fatalf("unknown click: %d %s", r.status, r.raw)
	}
}

// Another advertiser's click cannot be used, and the answer does not tell that it exists: it
// is exactly the answer to an id nobody made, on both routes that register conversions.
func TestAnotherAdvertisersClickGetsTheAnswerOfAMissingOne(t *testing.T) {
	f := newConversionsFixture(t)
	ctx := context.Background()
	other, key := f.company(t, identity.Advertiser)
	postback, err := f.svc.RotatePostbackToken(ctx, other, f.newProgram(t, other, "EUR"))
	if err != nil {
		t.Fatal(err)
	}
	send := map[string]func(clk string) response{
		"POST /api/v1/conversions": func(clk string) response {
			return f.do(t, "POST", "/api/v1/conversions", apiKey(key), `{"click_id":"`+clk+`","external_id":"o"}`)
		},
		"GET /postback": func(clk string) response {
			return f.do(t, "GET", "/postback?token="+postback+"&click_id="+clk+"&external_id=o&amount=1", nil, "")
		},
	}
	theirs, madeUp := f.click(t), ids.New(ids.Click) // both ids are seconds old
	for route, do := range send {
		a, b := do(theirs), do(madeUp)
		if a.status != b.status || a.problem.Code != b.problem.Code || a.problem.Detail != b.problem.Detail || a.header.Get("Retry-After") != b.header.Get("Retry-After") {
			t.Errorf("%s: another advertiser's click gets %d %v, a made-up id %d %v", route, a.status, a.problem.Code, b.status, b.problem.Code)
		}
		if a.status != 422 || a.problem.Code != "unknown_click" {
			t.Errorf("%s: a click id seconds old that is not the caller's: %d %s, want 422 unknown_click", route, a.status, a.raw)
		}
	}
}

// otherAdvertiserKey makes a second advertiser and returns its API key.
func (f *conversionsFixture) otherAdvertiserKey(t *testing.T) string {
	t.Helper()
	_, key := f.company(t, identity.Advertiser)
	return key
}

func TestTwentyConcurrentIdenticalRequestsMakeOneConversion(t *testing.T) {
	f := newConversionsFixture(t)
	base := f.serve(t)
	body := fmt.Sprintf(`{"click_id": %q, "external_id": "order-42", "amount": "42.50"}`, f.click(t))
	var wg sync.WaitGroup
	statuses := make([]int, 20)
	bodies := make([]conversion, 20)
	start := make(chan struct{})
	for i := range statuses {
		wg.Go(func() {
			<-start
			statuses[i], bodies[i] = f.post(base, f.adv, body)
		})
	}
	close(start)
	wg.Wait()
	created := 0
	for i, s := range statuses {
		switch {
		case s == 201:
			created++
		case s != 200:
			t.Fatalf("request %d: %d %v", i, s, bodies[i])
		}
		if bodies[i].ID != bodies[0].ID {
			t.Fatalf("request %d answered %v, request 0 %v", i, bodies[i].ID, bodies[0].ID)
		}
	}
	var rows, events int
	_ = f.db.QueryRow(context.Background(), `SELECT (SELECT count(*) FROM conversions), (SELECT count(*) FROM outbox)`).Scan(&rows, &events)
	if created != 1 || rows != 1 || events != 2 {
		t.Fatalf("%d created answers, %d rows, %d events; want 1, 1, 2", created, rows, events)
	}
}

// serve runs the fixture's server on a loopback port and returns its base URL.
func (f *conversionsFixture) serve(t testing.TB) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() { _ = f.srv.Run(ctx) }()
	addr, err := f.srv.Addr(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return "http://" + addr
}

var conversionsClient = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}, Timeout: 10 * time.Second}

// post sends a conversion over real HTTP.
func (f *conversionsFixture) post(base, key, body string) (int, conversion) {
	req, _ := http.NewRequest("POST", base+"/api/v1/conversions", bytes.NewBufferString(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("x-api-key", key)
	resp, err := conversionsClient.Do(req)
	if err != nil {
		return 0, conversion{ID: err.Error()}
	}
	defer resp.Body.Close()
	var out conversion
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

func TestDecidingAndReadingConversions(t *testing.T) {
	f := newConversionsFixture(t)
	adv := apiKey(f.adv)
	aff := apiKey(f.aff)
	dash := f.dashboardAs(t, "advertiser", "member")
	a, b, c := f.register(t, "a", "10.00"), f.register(t, "b", "20.00"), f.register(t, "c", "30.00")
	id := func(c conversion) string { return c.ID }
	commissionOf := func(r response) commission { return decode[conversion](t, r).Commission }

	if r := f.do(t, "POST", "/api/v1/conversions/"+id(a)+"/approve", adv, ""); r.status != 200 || commissionOf(r).Status != "approved" ||
		commissionOf(r).Version != 2 {
		t.Fatalf("approve: %d %s", r.status, r.raw)
	}
	r := f.do(t, "POST", "/api/v1/conversions/"+id(a)+"/reject", adv, `{"reason": "late"}`)
	if r.status != 409 || r.problem.Code != "invalid_transition" || r.problem.CurrentStatus != "approved" ||
		fmt.Sprint(r.problem.Allowed) != "[paid reversed]" {
		t.Fatalf("reject an approved one: %d %s", r.status, r.raw)
	}
	if r := f.do(t, "POST", "/api/conversions/"+id(b)+"/reject", dash, `{"reason": "returned"}`); r.status != 200 ||
		commissionOf(r).Status != "rejected" || commissionOf(r).Reason != "returned" {
		t.Fatalf("reject in the dashboard: %d %s", r.status, r.raw)
	}
	if r := f.do(t, "POST", "/api/conversions/"+id(a)+"/reverse", dash, ""); r.status != 200 || commissionOf(r).Status != "reversed" {
		t.Fatalf("reverse: %d %s", r.status, r.raw)
	}
	if r := f.do(t, "POST", "/api/v1/conversions/"+id(c)+"/approve", aff, ""); r.status != 403 {
		t.Fatalf("an affiliate approved: %d %s", r.status, r.raw)
	}
	if r := f.do(t, "POST", "/api/v1/conversions/"+id(c)+"/approve", apiKey(f.otherAdvertiserKey(t)), ""); r.status != 404 {
		t.Fatalf("another advertiser approved: %d %s", r.status, r.raw)
	}

	// Bulk: all or nothing, with each failure named.
	d := f.register(t, "d", "1.00")
	r = f.do(t, "POST", "/api/conversions/approve", dash, fmt.Sprintf(`{"ids": [%q, %q, %q]}`, id(c), id(b), id(d)))
	if r.status != 409 || r.problem.Code != "bulk_approval_failed" {
		t.Fatalf("bulk with a rejected one: %d %s", r.status, r.raw)
	}
	failures := r.problem.Failures
	if len(failures) != 1 || failures[0].ID != id(b) || failures[0].Status != "rejected" {
		t.Fatalf("failures %v", failures)
	}
	r = f.do(t, "POST", "/api/conversions/approve", dash, fmt.Sprintf(`{"ids": [%q, %q]}`, id(c), id(d)))
	if r.status != 200 || len(idsOf(t, r)) != 2 {
		t.Fatalf("bulk: %d %s", r.status, r.raw)
	}
	if r := f.do(t, "POST", "/api/conversions/approve", dash, `{"ids": []}`); r.status != 400 {
		t.Fatalf("an empty bulk: %d %s", r.status, r.raw)
	}

	// Reading: filters, the affiliate's view without the advertiser's metadata.
	approved := f.do(t, "GET", "/api/v1/conversions?status=approved&program_id="+f.program, adv, "")
	if got := idsOf(t, approved); !slices.Equal(got, []string{id(d), id(c)}) {
		t.Fatalf("approved: %d %v", approved.status, got)
	}
	mine := f.do(t, "GET", "/api/v1/conversions?limit=2", aff, "")
	minePage := decode[list[struct {
		Metadata json.RawMessage `json:"metadata"`
	}]](t, mine)
	if len(idsOf(t, mine)) != 2 || minePage.NextCursor == "" {
		t.Fatalf("affiliate list: %d %s", mine.status, mine.raw)
	}
	if minePage.Data[0].Metadata != nil {
		t.Fatal("the affiliate sees the advertiser's metadata")
	}
	next := f.do(t, "GET", "/api/v1/conversions?limit=2&cursor="+minePage.NextCursor, aff, "")
	if got := idsOf(t, next); len(got) != 2 || slices.Contains(idsOf(t, mine), got[0]) {
		t.Fatalf("second page %v", got)
	}
	one := f.do(t, "GET", "/api/v1/conversions/"+id(a), adv, "")
	if one.status != 200 || decode[struct{ Metadata map[string]any }](t, one).Metadata["coupon"] != "SPRING" {
		t.Fatalf("get: %d %s", one.status, one.raw)
	}
	for path, want := range map[string][]string{
		"/api/partner-api/commissions?status=rejected": {id(b)},
		"/api/v1/commissions?status=reversed":          {id(a)},
	} {
		r := f.do(t, "GET", path, aff, "")
		var got []string
		for _, m := range decode[list[commission]](t, r).Data {
			got = append(got, m.ConversionID)
		}
		if r.status != 200 || !slices.Equal(got, want) {
			t.Fatalf("%s: %d %v, want %v", path, r.status, got, want)
		}
	}
	if r := f.do(t, "GET", "/api/conversions", dash, ""); len(idsOf(t, r)) != 4 {
		t.Fatalf("dashboard list: %d %s", r.status, r.raw)
	}
	stranger := apiKey(f.otherAdvertiserKey(t))
	if r := f.do(t, "GET", "/api/v1/conversions/"+id(a), stranger, ""); r.status != 404 {
		t.Fatalf("another advertiser read it: %d", r.status)
	}
	if got := idsOf(t, f.do(t, "GET", "/api/v1/conversions", stranger, "")); len(got) != 0 {
		t.Fatalf("another advertiser lists %d", len(got))
	}
	for _, q := range []string{"status=done", "program_id=42", "from=tomorrow", "from=2026-03-02&to=2026-03-01", "limit=500"} {
		if r := f.do(t, "GET", "/api/v1/conversions?"+q, adv, ""); r.status != 400 {
			t.Errorf("?%s: %d, want 400", q, r.status)
		}
	}
	if r := f.do(t, "GET", "/api/v1/conversions/nope", adv, ""); r.status != 404 {
		t.Fatalf("a malformed id: %d", r.status)
	}
}

// TestRejectingConversionsInBulk mirrors the bulk approval: all or nothing, each failure
// named, another advertiser's ids not found and left alone, advertisers only, idempotent.
func TestRejectingConversionsInBulk(t *testing.T) {
	f := newConversionsFixture(t)
	ctx := context.Background()
	dash := f.dashboardAs(t, "advertiser", "member")
	id := func(c conversion) string { return c.ID }
	a, b, c := id(f.register(t, "a", "10.00")), id(f.register(t, "b", "20.00")), id(f.register(t, "c", "30.00"))
	if r := f.do(t, "POST", "/api/conversions/"+c+"/approve", dash, ""); r.status != 200 {
		t.Fatalf("approve: %d %s", r.status, r.raw)
	}

	// Another advertiser with a program the fixture's affiliate promotes, and a conversion.
	other, otherKey := f.company(t, identity.Advertiser)
	otherProgram := f.newProgram(t, other, "EUR")
	r := f.do(t, "POST", "/api/v1/conversions", apiKey(otherKey),
		fmt.Sprintf(`{"click_id": %q, "external_id": "theirs"}`, f.clicks(t, otherProgram, time.Now().Add(-time.Hour), 1)[0]))
	if r.status != 201 {
		t.Fatalf("register theirs: %d %s", r.status, r.raw)
	}
	theirs := decode[conversion](t, r).ID

	body := func(reason string, convs ...string) string {
		ids, _ := json.Marshal(convs)
		return fmt.Sprintf(`{"ids": %s, "reason": %q}`, ids, reason)
	}
	for _, tc := range []struct {
		name     string
		body     string
		failures map[string]string // id -> code
	}{
		{"another advertiser's conversion is not found and nothing is rejected", body("", a, theirs), map[string]string{theirs: "not_found"}},
		{"an approved conversion is named with its status", body("", a, c), map[string]string{c: "invalid_transition"}},
		{"an unknown conversion is not found", body("", a, ids.New(ids.Conversion)), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := f.do(t, "POST", "/api/conversions/reject", dash, tc.body)
			if r.status != 409 || r.problem.Code != "bulk_rejection_failed" {
				t.Fatalf("%d %s", r.status, r.raw)
			}
			failures := r.problem.Failures
			if len(failures) != 1 {
				t.Fatalf("failures %v", failures)
			}
			got := failures[0]
			for fid, code := range tc.failures {
				if got.ID != fid || got.Code != code {
					t.Fatalf("failure %+v, want %s %s", got, fid, code)
				}
				if code == "invalid_transition" && (got.Status != "approved" || fmt.Sprint(got.Allowed) != "[paid reversed]") {
					t.Fatalf("failure %+v, want approved with [paid reversed]", got)
				}
			}
			if tc.failures == nil && got.Code != "not_found" {
				t.Fatalf("failure %v, want not_found", got)
			}
		})
	}
	if r := f.do(t, "GET", "/api/v1/conversions/"+theirs, apiKey(otherKey), ""); r.status != 200 ||
		decode[conversion](t, r).Commission.Status != "pending" {
		t.Fatalf("another advertiser's conversion after the refusals: %d %s", r.status, r.raw)
	}

	for _, tc := range []struct {
		name    string
		headers map[string]string
		body    string
		status  int
	}{
		{"an affiliate cannot reject", f.dashboardAs(t, "affiliate", "owner"), body("", a), 403},
		{"an API key cannot use the dashboard route", apiKey(f.adv), body("", a), 401},
		{"no ids is invalid", dash, `{"ids": []}`, 400},
		{"a repeated id is invalid", dash, body("", a, a), 400},
		{"an unknown field is invalid", dash, `{"ids": [` + fmt.Sprintf("%q", a) + `], "why": "x"}`, 400},
		{"a reason over 500 characters is invalid", dash, body(strings.Repeat("x", conversions.MaxReason+1), a), 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if r := f.do(t, "POST", "/api/conversions/reject", tc.headers, tc.body); r.status != tc.status {
				t.Fatalf("%d %s, want %d", r.status, r.raw, tc.status)
			}
		})
	}
	if got := idsOf(t, f.do(t, "GET", "/api/conversions?status=pending", dash, "")); !slices.Equal(got, []string{b, a}) {
		t.Fatalf("pending after the refusals: %v, want %v", got, []string{b, a})
	}

	headers := map[string]string{"Authorization": dash["Authorization"], "Idempotency-Key": ids.New("idem")}
	first := f.do(t, "POST", "/api/conversions/reject", headers, body("  chargeback  ", b, a))
	if first.status != 200 {
		t.Fatalf("reject: %d %s", first.status, first.raw)
	}
	data := decode[list[conversion]](t, first).Data
	if len(data) != 2 {
		t.Fatalf("data %v", data)
	}
	for i, want := range []string{b, a} {
		conv := data[i]
		if conv.ID != want || conv.Commission.Status != "rejected" || conv.Commission.Reason != "chargeback" ||
			conv.Commission.Version != 2 {
			t.Fatalf("result %d: %v, want %s rejected for chargeback at v2", i, conv, want)
		}
	}
	// The same request again is answered from the first, not refused as already rejected.
	again := f.do(t, "POST", "/api/conversions/reject", headers, body("  chargeback  ", b, a))
	if again.status != 200 || again.header.Get("Idempotent-Replayed") != "true" || again.raw != first.raw {
		t.Fatalf("replay: %d %s", again.status, again.raw)
	}
	var events int
	if err := f.db.QueryRow(ctx, `SELECT count(*) FROM outbox WHERE aggregate_id = ANY($1) AND type IN ('conversion.rejected', 'commission.status_changed')
		AND envelope->'data'->>'status' = 'rejected'`, []string{a, b}).Scan(&events); err != nil {
		t.Fatal(err)
	}
	if events != 4 {
		t.Fatalf("%d rejection events, want conversion.rejected and commission.status_changed for each of 2", events)
	}
}

func TestPayoutsThroughTheDashboard(t *testing.T) {
	f := newConversionsFixture(t)
	adv := f.dashboardAs(t, "advertiser", "member")
	aff := f.dashboardAs(t, "affiliate", "member")
	var convs []string
	for _, amount := range []string{"10.01", "0.09", "99.99"} {
		c := f.register(t, ids.New("ord"), amount)
		if r := f.do(t, "POST", "/api/conversions/"+c.ID+"/approve", adv, ""); r.status != 200 {
			t.Fatalf("approve: %d %s", r.status, r.raw)
		}
		convs = append(convs, c.ID)
	}
	today := time.Now().UTC().Format(time.DateOnly)
	tomorrow := time.Now().UTC().Add(24 * time.Hour).Format(time.DateOnly)
	body := fmt.Sprintf(`{"affiliate_id": %q, "currency": "EUR", "period_start": %q, "period_end": %q}`, f.affID, today, tomorrow)
	if r := f.do(t, "POST", "/api/payouts", aff, body); r.status != 403 {
		t.Fatalf("an affiliate made a payout: %d", r.status)
	}
	r := f.do(t, "POST", "/api/payouts", adv, body)
	// 1.00 + 0.01 + 10.00 (10 % each, half up)
	made := decode[payoutAnswer](t, r)
	if r.status != 201 || made.Amount != "11.01" || made.CommissionCount != 3 || made.Status != "pending" {
		t.Fatalf("create: %d %s", r.status, r.raw)
	}
	payout := made.ID
	// Both sides read each other's names beside the ids.
	type names struct {
		AdvertiserName string `json:"advertiser_name"`
		AffiliateName  string `json:"affiliate_name"`
	}
	want := names{AdvertiserName: "advertiser co", AffiliateName: "affiliate co"}
	if got := decode[names](t, r); got != want {
		t.Errorf("the new payout's names %+v", got)
	}
	for _, h := range []map[string]string{adv, aff} {
		for _, path := range []string{"/api/payouts", "/api/conversions"} {
			if got := decode[list[names]](t, f.do(t, "GET", path, h, "")).Data; len(got) == 0 || got[0] != want {
				t.Errorf("%s lists the names %+v", path, got)
			}
		}
	}
	if r := f.do(t, "POST", "/api/payouts", adv, body); r.status != 422 || r.problem.Code != "no_commissions" {
		t.Fatalf("nothing left: %d %s", r.status, r.raw)
	}
	if r := f.do(t, "GET", "/api/payouts/"+payout, aff, ""); r.status != 200 || decode[payoutAnswer](t, r).Amount != "11.01" {
		t.Fatalf("the affiliate reads it: %d %s", r.status, r.raw)
	}
	if r := f.do(t, "GET", "/api/payouts?status=pending", aff, ""); !slices.Equal(idsOf(t, r), []string{payout}) {
		t.Fatalf("the affiliate lists it: %d %s", r.status, r.raw)
	}
	if r := f.do(t, "GET", "/api/commissions?payout_id="+payout, adv, ""); len(decode[list[commission]](t, r).Data) != 3 {
		t.Fatalf("its commissions: %s", r.raw)
	}
	if r := f.do(t, "POST", "/api/conversions/"+convs[0]+"/reverse", adv, ""); r.status != 409 || r.problem.Code != "commission_in_payout" {
		t.Fatalf("reverse in a payout: %d %s", r.status, r.raw)
	}
	if r := f.do(t, "POST", "/api/payouts/"+payout+"/paid", aff, ""); r.status != 403 {
		t.Fatalf("the affiliate marked it paid: %d", r.status)
	}
	if r := f.do(t, "POST", "/api/payouts/"+payout+"/paid", adv, ""); r.status != 200 || decode[payoutAnswer](t, r).Status != "paid" {
		t.Fatalf("paid: %d %s", r.status, r.raw)
	}
	if r := f.do(t, "GET", "/api/v1/commissions?status=paid", apiKey(f.aff), ""); len(decode[list[commission]](t, r).Data) != 3 {
		t.Fatalf("paid commissions: %s", r.raw)
	}
	if r := f.do(t, "POST", "/api/payouts/"+payout+"/cancel", adv, ""); r.status != 409 || r.problem.CurrentStatus != "paid" {
		t.Fatalf("cancel a paid payout: %d %s", r.status, r.raw)
	}
	if r := f.do(t, "GET", "/api/payouts/"+ids.New(ids.Payout), adv, ""); r.status != 404 {
		t.Fatalf("unknown payout: %d", r.status)
	}
}

func TestThePostbackURL(t *testing.T) {
	f := newConversionsFixture(t)
	if r := f.do(t, "POST", "/api/programs/"+f.program+"/postback-token", f.dashboardAs(t, "advertiser", "member"), ""); r.status != 403 {
		t.Fatalf("a member made a token: %d", r.status)
	}
	if r := f.do(t, "POST", "/api/programs/"+f.program+"/postback-token", f.dashboardAs(t, "affiliate", "owner"), ""); r.status != 403 {
		t.Fatalf("an affiliate made a token: %d", r.status)
	}
	r := f.do(t, "POST", "/api/programs/"+f.program+"/postback-token", f.dashboardAs(t, "advertiser", "owner"), "")
	if r.status != 201 || r.header.Get("Cache-Control") != "no-store" {
		t.Fatalf("token: %d %s", r.status, r.raw)
	}
	tok := decode[postbackToken](t, r)
	token := tok.Token
	if !strings.Contains(tok.PostbackURL, token) {
		t.Fatalf("postback_url %v", tok.PostbackURL)
	}
	clk := f.click(t)
	url := "/postback?token=" + token + "&click_id=" + clk + "&external_id=order-9&amount=19.99&currency=EUR&type=sale"
	first := f.do(t, "GET", url, nil, "")
	made := decode[postbackAnswer](t, first)
	if first.status != 200 || !made.Created || made.CommissionStatus != "pending" {
		t.Fatalf("postback: %d %s", first.status, first.raw)
	}
	again := f.do(t, "GET", url, nil, "")
	if a := decode[postbackAnswer](t, again); again.status != 200 || a.Created || a.ID != made.ID {
		t.Fatalf("repeat: %d %s", again.status, again.raw)
	}
	conv := f.do(t, "GET", "/api/v1/conversions/"+made.ID, apiKey(f.adv), "")
	if c := decode[conversion](t, conv); c.Source != "postback" || c.Commission.Amount != "2.00" {
		t.Fatalf("registered %s", conv.raw)
	}
	for name, c := range map[string]struct {
		url    string
		status int
		code   string
	}{
		"no token":                  {"/postback?click_id=" + clk + "&external_id=x", 401, "invalid_postback_token"},
		"a wrong token":             {"/postback?token=" + token[:len(token)-4] + "ffff&click_id=" + clk + "&external_id=x", 401, "invalid_postback_token"},
		"a malformed click id":      {"/postback?token=" + token + "&click_id=" + ids.New(ids.Click)[:10] + "&external_id=x", 400, "validation_failed"},
		"bad occurred_at":           {"/postback?token=" + token + "&click_id=" + clk + "&external_id=x&occurred_at=now", 400, "validation_failed"},
		"occurred_at in 1900":       {"/postback?token=" + token + "&click_id=" + clk + "&external_id=x&occurred_at=1900-01-01T00:00:00Z", 400, "validation_failed"},
		"an external id with a tab": {"/postback?token=" + token + "&click_id=" + clk + "&external_id=o%091", 400, "validation_failed"},
		"a customer id with CR/LF":  {"/postback?token=" + token + "&click_id=" + clk + "&external_id=x&customer_id=c%0D%0A1", 400, "validation_failed"},
	} {
		if r := f.do(t, "GET", c.url, nil, ""); r.status != c.status || r.problem.Code != c.code {
			t.Errorf("%s: %d %s, want %d %s", name, r.status, r.raw, c.status, c.code)
		}
	}
}

func TestAConversionInAnotherCurrencyShowsBothAmounts(t *testing.T) {
	f := newConversionsFixture(t)
	day := time.Now().UTC().Add(-time.Minute).Format(time.DateOnly)
	body := fmt.Sprintf(`{"click_id": %q, "external_id": "usd-1", "amount": "100.01", "currency": "USD", "occurred_at": %q}`,
		f.click(t), time.Now().UTC().Add(-time.Minute).Format(time.RFC3339))
	r := f.do(t, "POST", "/api/v1/conversions", apiKey(f.adv), body)
	if p := r.problem; r.status != 422 || p.Code != "no_exchange_rate" || p.Base != "USD" || p.Quote != "EUR" || p.Date != day ||
		!strings.Contains(p.Detail, "USD/EUR") {
		t.Fatalf("without a rate: %d %s", r.status, r.raw)
	}
	if _, err := rates.New(f.db, nil).Set(context.Background(), f.advID, rates.NewRate{Day: day, Base: "USD", Quote: "EUR", Rate: "0.9172"}); err != nil {
		t.Fatal(err)
	}
	r = f.do(t, "POST", "/api/v1/conversions", apiKey(f.adv), body)
	c := decode[conversion](t, r)
	com := c.Commission
	if r.status != 201 || c.Amount != "91.73" || c.Currency != "EUR" || c.OriginalAmount == nil || *c.OriginalAmount != "100.01" ||
		c.OriginalCurrency != "USD" || c.ExchangeRate != "0.9172" || c.RateDate != day ||
		c.ConvertedAmount != "91.73" || com.Amount != "9.17" || com.OriginalAmount != "100.01" || com.ExchangeRate != "0.9172" {
		t.Fatalf("with a rate: %d %s", r.status, r.raw)
	}
	// the affiliate sees both amounts too
	if l := f.do(t, "GET", "/api/partner-api/commissions", apiKey(f.aff), ""); !strings.Contains(l.raw, `"original_amount":"100.01"`) {
		t.Fatalf("the affiliate's commissions: %s", l.raw)
	}
	// a conversion in the program currency has none of the fields
	same := f.register(t, "eur-1", "10.00")
	if same.OriginalAmount != nil {
		t.Fatalf("same currency: %v", same)
	}
}

// TestTheConversionRoutesAreDocumented compares the routes the conversion mounts add with
// the paths of 22-conversions.yaml.
func TestTheConversionRoutesAreDocumented(t *testing.T) {
	assertAreaDocumented(t, func(s *httpapi.Server) {
		s.MountConversions(nil)
		s.MountPayouts(nil)
		s.MountConversionPostback(nil)
	}, "openapi/22-conversions.yaml")
}
