package conversions_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/partnerstream/partnerstream/internal/clickid"
	"github.com/partnerstream/partnerstream/internal/conversions"
	"github.com/partnerstream/partnerstream/internal/events"
	"github.com/partnerstream/partnerstream/internal/identity"
	"github.com/partnerstream/partnerstream/internal/ids"
	"github.com/partnerstream/partnerstream/internal/testenv"
	"github.com/partnerstream/partnerstream/internal/testenv/pgtest"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// env is a migrated Postgres with an advertiser, an affiliate, a program in
// EUR (10 % commission, 30-day window, no hold) and their approved partnership.
type env struct {
	db      *pgxpool.Pool
	svc     *conversions.Service
	clock   *testenv.Clock
	ids     *identity.Store
	adv     string // advertiser company id
	aff     string // affiliate company id
	program string
	ptn     string
	keys    clickid.Keys      // sign and verify the click ids
	links   map[string]string // "program/affiliate" -> the link clicks are made on
}

func newEnv(t testing.TB) *env {
	t.Helper()
	_, db := pgtest.Migrated(t)
	e := &env{db: db, ids: identity.NewStore(db), clock: testenv.NewClock(), keys: clickIDKeys(t), links: map[string]string{}}
	e.clock.Set(time.Now().UTC().Truncate(time.Second))
	e.svc = conversions.New(db, conversions.Options{Now: e.clock.Now, ClickIDs: e.keys})
	e.adv = e.company(t, identity.Advertiser)
	e.aff = e.company(t, identity.Affiliate)
	e.program = e.newProgram(t, e.adv, "EUR", "percent", 1000, nil)
	e.ptn = e.partner(t, e.program, e.aff, "", 0)
	return e
}

func (e *env) company(t testing.TB, kind string) string {
	t.Helper()
	co, _, err := e.ids.CreateCompany(context.Background(), identity.NewCompany{Kind: kind, Name: kind, OwnerEmail: ids.New("usr") + "@example.test"})
	if err != nil {
		t.Fatal(err)
	}
	return co.ID
}

// newProgram inserts a program directly (internal/programs owns the real routes).
func (e *env) newProgram(t testing.TB, advertiser, currency, rule string, value int64, holdDays *int) string {
	t.Helper()
	id := ids.New(ids.Program)
	if _, err := e.db.Exec(context.Background(), `INSERT INTO programs (id, advertiser_id, name, landing_url, currency,
		commission_type, commission_value, attribution_window_days, hold_days) VALUES ($1, $2, 'p', 'https://shop.example/', $3, $4, $5, 30, $6)`,
		id, advertiser, currency, rule, value, holdDays); err != nil {
		t.Fatal(err)
	}
	return id
}

// partner approves affiliate in program, with a commission override when rule is set.
func (e *env) partner(t testing.TB, program, affiliate, rule string, value int64) string {
	t.Helper()
	id := ids.New(ids.Partnership)
	var r, v any
	if rule != "" {
		r, v = rule, value
	}
	if _, err := e.db.Exec(context.Background(), `INSERT INTO partnerships (id, program_id, affiliate_id, advertiser_id, status,
		commission_type, commission_value) SELECT $1, $2, $3, advertiser_id, 'approved', $4, $5 FROM programs WHERE id = $2`,
		id, program, affiliate, r, v); err != nil {
		t.Fatal(err)
	}
	return id
}

// click makes the signed id of a click on the affiliate's link in program at at (the
// redirect's work), and returns it.
func (e *env) click(t testing.TB, program, affiliate string, at time.Time) string {
	t.Helper()
	return e.clicks(t, program, affiliate, at, 1)[0]
}

// clicks makes n click ids on one link of affiliate in program, approving the affiliate in
// the program first when it is not a partner yet (a link belongs to a partnership).
func (e *env) clicks(t testing.TB, program, affiliate string, at time.Time, n int) []string {
	t.Helper()
	ctx := context.Background()
	var partnership string
	if err := e.db.QueryRow(ctx, `SELECT id FROM partnerships WHERE program_id = $1 AND affiliate_id = $2`, program, affiliate).Scan(&partnership); err != nil {
		partnership = e.partner(t, program, affiliate, "", 0)
	}
	key := program + "/" + affiliate
	link, ok := e.links[key]
	if !ok {
		link = e.link(t, program, affiliate, partnership)
		e.links[key] = link
	}
	made := make([]string, n)
	for i := range made {
		made[i] = mint(t, e.keys, link, at)
	}
	return made
}

// register reports a sale of amount EUR an hour after a fresh click.
func (e *env) register(t testing.TB, externalID, amount string) conversions.Conversion {
	t.Helper()
	now := e.clock.Now()
	clk := e.click(t, e.program, e.aff, now.Add(-time.Hour))
	c, created, err := e.svc.Register(context.Background(), e.adv, conversions.NewConversion{
		ClickID: clk, ExternalID: externalID, Amount: amount, Currency: "EUR", OccurredAt: now.Add(-time.Minute)})
	if err != nil || !created {
		t.Fatalf("Register: %v (created %v)", err, created)
	}
	return c
}

// outboxEvent is one outbox row, decoded.
type outboxEvent struct {
	aggregate string
	envelope  events.Envelope
	data      events.ConversionData
}

// outboxFor returns the outbox rows of an aggregate in publication order.
func (e *env) outboxFor(t testing.TB, aggregate string) []outboxEvent {
	t.Helper()
	rows, err := e.db.Query(context.Background(), `SELECT aggregate_id, envelope FROM outbox WHERE aggregate_id = $1 ORDER BY id`, aggregate)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []outboxEvent
	for rows.Next() {
		var ev outboxEvent
		var raw []byte
		if err := rows.Scan(&ev.aggregate, &raw); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(raw, &ev.envelope); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(ev.envelope.Data, &ev.data); err != nil {
			t.Fatal(err)
		}
		out = append(out, ev)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func (e *env) count(t testing.TB, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := e.db.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
