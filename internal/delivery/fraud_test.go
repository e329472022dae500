package delivery

import (
	"context"
	"encoding/json"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/partnerstream/partnerstream/internal/clickid"
	"github.com/partnerstream/partnerstream/internal/conversions"
	"github.com/partnerstream/partnerstream/internal/events"
	"github.com/partnerstream/partnerstream/internal/fraud"
	"github.com/partnerstream/partnerstream/internal/ids"
)

// A conversion a fraud rule holds, then released: every event of it reaches both companies'
// webhooks and postback URLs signed as the Standard Webhooks library verifies, and carries the
// verdict with its reason code (the postback also in its {reason_codes} placeholder).
func TestHoldAndReleaseEventsReachReceiversWithTheirReasonCodes(t *testing.T) {
	t.Parallel()
	db, cos := newDB(t, 1)
	adv := cos[0]
	ctx := context.Background()
	aff, _, link := seedProgram(t, db, adv, "FRAUDLINK1")
	if _, err := db.Exec(ctx, `INSERT INTO users (id, company_id, email, role) VALUES ($1, $2, 'owner@affiliate.example', 'owner')`,
		ids.New(ids.User), aff); err != nil {
		t.Fatal(err)
	}
	keys, err := clickid.ParseKeys(clickid.GenerateKeySpec())
	if err != nil {
		t.Fatal(err)
	}
	click, err := keys.Mint(link, time.Now().Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	cnv := conversions.New(db, conversions.Options{ClickIDs: keys})
	// Self-referral holds by default: the customer is the affiliate's own user.
	c, _, err := cnv.Register(ctx, adv, conversions.NewConversion{ClickID: click, ExternalID: "order-1", Amount: "80.00",
		CustomerEmail: "Owner+test@affiliate.example"})
	if err != nil || c.Commission.HeldAt == nil {
		t.Fatalf("Register: %v, held %v", err, c.Commission.HeldAt)
	}
	if _, err := cnv.Release(ctx, adv, []string{c.ID}); err != nil {
		t.Fatal(err)
	}

	rc := newReceiver(t, nil)
	sub, pb := newSubs(), newPostbacks()
	types := []string{events.ConversionCreated, events.CommissionHeld, events.CommissionReleased}
	_, advSecret := sub.add(adv, rc.URL+"/adv", types...)
	_, affSecret := sub.add(aff, rc.URL+"/aff", events.CommissionHeld)
	affPostback := pb.set(aff, rc.URL+"/aff-postback?codes={reason_codes}&s={status}")
	s := newService(t, db, Options{Subscriptions: sub, Postbacks: pb})

	deliverOutbox(t, s, db, c.ID)

	// The advertiser: created, held, released; the affiliate: held; the affiliate's postback
	// URL: status changed, held, released.
	want := map[string][]string{
		"/adv":          types,
		"/aff":          {events.CommissionHeld},
		"/aff-postback": {events.CommissionStatusChanged, events.CommissionHeld, events.CommissionReleased},
	}
	secrets := map[string]string{"/adv": advSecret, "/aff": affSecret, "/aff-postback": affPostback}
	got := map[string][]string{}
	for _, r := range rc.requests() {
		path := r.header.Get(pathHeader)
		if err := verify(t, r, secrets[path], true); err != nil {
			t.Errorf("%s: the Standard Webhooks library refuses the delivery: %v", path, err)
		}
		var body struct {
			Event string                `json:"event"`
			Data  events.ConversionData `json:"data"`
		}
		if err := json.Unmarshal(r.body, &body); err != nil {
			t.Fatal(err)
		}
		got[path] = append(got[path], body.Event)
		if codes := body.Data.Risk.ReasonCodes(); !slices.Equal(codes, []string{fraud.SelfReferral}) {
			t.Errorf("%s %s: reason codes %v in %s", path, body.Event, codes, r.body)
		}
		if held := body.Data.Risk != nil && body.Data.Risk.Held; held != (body.Event != events.CommissionReleased) {
			t.Errorf("%s %s: held %v", path, body.Event, held)
		}
		if path == "/aff-postback" {
			q, _ := url.ParseQuery(r.header.Get(queryHeader))
			if q.Get("codes") != fraud.SelfReferral || q.Get("s") != "pending" {
				t.Errorf("postback query %s", r.header.Get(queryHeader))
			}
		}
		if strings.Contains(strings.ToLower(string(r.body)), "owner") {
			t.Errorf("%s: the body shows the customer e-mail: %s", path, r.body)
		}
	}
	for path, evs := range want {
		g := slices.Clone(got[path])
		slices.Sort(g)
		w := slices.Clone(evs)
		slices.Sort(w)
		if !slices.Equal(g, w) {
			t.Errorf("%s received %v, want %v", path, got[path], evs)
		}
	}
}

// seedProgram adds an affiliate with an approved partnership in a new EUR program (10 %, 30
// days) of adv and a tracking link of it with code; it returns the affiliate, the program and
// the link.
func seedProgram(t *testing.T, db *pgxpool.Pool, adv, code string) (aff, program, link string) {
	t.Helper()
	ctx := context.Background()
	aff, program, ptn, link := ids.New(ids.Company), ids.New(ids.Program), ids.New(ids.Partnership), ids.New(ids.Link)
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{`INSERT INTO companies (id, kind, name) VALUES ($1, 'affiliate', 'aff')`, []any{aff}},
		{`INSERT INTO programs (id, advertiser_id, name, landing_url, currency, commission_type, commission_value, attribution_window_days)
			VALUES ($1, $2, 'p', 'https://shop.example/', 'EUR', 'percent', 1000, 30)`, []any{program, adv}},
		{`INSERT INTO partnerships (id, program_id, affiliate_id, advertiser_id, status) VALUES ($1, $2, $3, $4, 'approved')`, []any{ptn, program, aff, adv}},
		{`INSERT INTO tracking_links (id, code, partnership_id, program_id, affiliate_id, advertiser_id) VALUES ($1, $2, $3, $4, $5, $6)`,
			[]any{link, code, ptn, program, aff, adv}},
	} {
		if _, err := db.Exec(ctx, q.sql, q.args...); err != nil {
			t.Fatal(err)
		}
	}
	return aff, program, link
}

// deliverOutbox records the outbox events of a conversion for delivery and runs one step.
func deliverOutbox(t *testing.T, s *Service, db *pgxpool.Pool, conversionID string) {
	t.Helper()
	ctx := context.Background()
	rows, err := db.Query(ctx, `SELECT envelope FROM outbox WHERE aggregate_id = $1 ORDER BY id`, conversionID)
	if err != nil {
		t.Fatal(err)
	}
	var envs []events.Envelope
	for rows.Next() {
		var raw []byte
		var e events.Envelope
		if err := rows.Scan(&raw); err != nil || json.Unmarshal(raw, &e) != nil {
			t.Fatalf("outbox row %s: %v", raw, err)
		}
		envs = append(envs, e)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.record(ctx, envs); err != nil {
		t.Fatal(err)
	}
	s.step(t)
}
