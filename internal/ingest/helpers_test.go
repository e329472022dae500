package ingest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"reflect"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/partnerstream/partnerstream/internal/events"
	"github.com/partnerstream/partnerstream/internal/identity"
	"github.com/partnerstream/partnerstream/internal/kafka"
	"github.com/partnerstream/partnerstream/internal/money"
	"github.com/partnerstream/partnerstream/internal/stats"
	"github.com/partnerstream/partnerstream/internal/testenv"
	"github.com/partnerstream/partnerstream/internal/testenv/chtest"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func TestMain(m *testing.M) {
	if os.Getenv(envChild) != "" {
		os.Exit(runChild())
	}
	if os.Getenv(envBenchChild) != "" {
		os.Exit(runBenchChild())
	}
	os.Exit(m.Run())
}

// env is one test's Kafka broker and ClickHouse database, migrated.
type env struct {
	kafka kafka.Config
	addr  string
	db    string
	conn  driver.Conn
}

func newEnv(t testing.TB) *env {
	t.Helper()
	ctx := context.Background()
	addr, db, conn := chtest.Migrated(t)
	cfg := kafka.Config{Brokers: testenv.Kafka(t), Partitions: 6, ReplicationFactor: 1, Retention: time.Hour, ClientID: "ingest-test"}
	if err := kafka.EnsureTopics(ctx, cfg, kafka.TopicClicks, kafka.TopicEvents); err != nil {
		t.Fatal(err)
	}
	return &env{kafka: cfg, addr: addr, db: db, conn: conn}
}

func (e *env) service(t testing.TB, o Options) *Service {
	t.Helper()
	o.Kafka, o.ClickHouse, o.Database = e.kafka, e.conn, e.db
	if o.Log == nil {
		o.Log = quiet
	}
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// produce writes messages to a topic, keyed as the platform keys them.
func (e *env) produce(t testing.TB, topic string, msgs []kafka.Record) {
	t.Helper()
	w := kafka.NewProducer(e.kafka, topic, kafka.ProducerOptions{})
	defer w.Close()
	for len(msgs) > 0 {
		n := min(len(msgs), 5000)
		if err := kafka.FirstError(w.Produce(context.Background(), msgs[:n])); err != nil {
			t.Fatalf("produce to %s: %v", topic, err)
		}
		msgs = msgs[n:]
	}
}

// waitCaughtUp waits until the consumer group has committed every message of topic.
func (e *env) waitCaughtUp(t testing.TB, group, topic string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var behind string
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		end, done, err := kafka.Offsets(ctx, e.kafka, group, topic)
		cancel()
		if err == nil {
			// Every partition is checked: the broker may leave out a partition the group has
			// not committed yet, or answer one with an error, and neither is caught up.
			behind = ""
			for part := range e.kafka.Partitions {
				last, ok := end[part]
				off, committed := done[part]
				if !ok || last < 0 || (last > 0 && (!committed || off < last)) {
					behind += fmt.Sprintf(" p%d:%d<%d", part, off, last)
				}
			}
			if behind == "" {
				return
			}
		} else {
			behind = err.Error()
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("group %s has not caught up with %s after %s:%s", group, topic, timeout, behind)
}

func (e *env) count(t testing.TB, query string) uint64 {
	t.Helper()
	var n uint64
	if err := e.conn.QueryRow(context.Background(), query).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

// dataset is a deterministic stream of clicks and domain events as the tracker and the
// conversions service emit them, with the duplicates at-least-once delivery produces.
type dataset struct {
	clicks []events.Click    // in produce order, duplicates included
	events []events.Envelope // in produce order, duplicates and late stale copies included
}

type company struct{ id, kind string }

var (
	advA = company{"co_adv_a", identity.Advertiser}
	advB = company{"co_adv_b", identity.Advertiser}
	affX = company{"co_aff_x", identity.Affiliate}
	affY = company{"co_aff_y", identity.Affiliate}
	affZ = company{"co_aff_z", identity.Affiliate}
)

type program struct {
	id       string
	adv      company
	currency string
}

var programs = []program{{"prg_a1", advA, "EUR"}, {"prg_a2", advA, "EUR"}, {"prg_b1", advB, "USD"}}

// The dataset's days: traffic on 1, 2, 4 and 5 November; the 3rd has none.
var (
	firstDay    = time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	trafficDays = []int{0, 1, 3, 4}
	rangeFrom   = firstDay.AddDate(0, 0, -2)
	rangeTo     = firstDay.AddDate(0, 0, 6)
)

func newDataset(seed uint64, nClicks int) dataset {
	r := rand.New(rand.NewPCG(seed, 7))
	var d dataset
	sub1s := []string{"", "email", "social", "seo"}
	for i := range nClicks {
		p := programs[r.IntN(len(programs))]
		aff := []company{affX, affY, affZ}[r.IntN(3)]
		day := trafficDays[r.IntN(len(trafficDays))]
		c := events.Click{
			ClickID:      fmt.Sprintf("clk_%06d_%d", i, seed),
			OccurredAt:   firstDay.AddDate(0, 0, day).Add(time.Duration(r.IntN(86400)) * time.Second),
			LinkID:       fmt.Sprintf("lnk_%s_%s_%d", p.id, aff.id, r.IntN(2)),
			ProgramID:    p.id,
			AffiliateID:  aff.id,
			AdvertiserID: p.adv.id,
			Sub1:         sub1s[r.IntN(len(sub1s))],
			IP:           fmt.Sprintf("203.0.113.%d", r.IntN(250)),
			UserAgent:    "Mozilla/5.0",
			IsBot:        r.IntN(20) == 0,
			IsDuplicate:  r.IntN(5) == 0,
			LandingURL:   "https://shop.example/",
		}
		d.clicks = append(d.clicks, c)
		if r.IntN(20) == 0 { // a producer's retry
			d.clicks = append(d.clicks, c)
		}
		if !c.IsBot && r.IntN(25) == 0 {
			d.events = append(d.events, conversionLifecycle(r, c, p, len(d.events))...)
		}
	}
	// A relay crash republishes a stretch of events, ids unchanged, after newer ones.
	d.events = append(d.events, d.events[:len(d.events)/10]...)
	d.events = append(d.events, events.Envelope{ID: "evt_partnership", Type: events.PartnershipCreated,
		OccurredAt: firstDay, AdvertiserID: advA.id, AffiliateID: affX.id, Data: json.RawMessage(`{"id":"ptn_1"}`)})
	return d
}

// conversionLifecycle emits the events of one conversion the way the conversions service
// does: per status change, conversion.<status> (when there is one) and
// commission.status_changed, both with the same data and version.
func conversionLifecycle(r *rand.Rand, c events.Click, p program, n int) []events.Envelope {
	paths := [][]string{
		{events.CommissionPending},
		{events.CommissionPending, events.CommissionApproved},
		{events.CommissionPending, events.CommissionApproved, events.CommissionPaid},
		{events.CommissionPending, events.CommissionRejected},
		{events.CommissionPending, events.CommissionApproved, events.CommissionReversed},
	}
	path := paths[r.IntN(len(paths))]
	amount := int64(1000 + r.IntN(50000))
	data := events.ConversionData{
		ID: fmt.Sprintf("cnv_%s", c.ClickID[4:]), Type: "sale", Amount: money.Format(amount, p.currency),
		Currency: p.currency, CommissionID: "cms_" + c.ClickID[4:], CommissionAmount: money.Format(amount/10, p.currency),
		ProgramID: p.id, AffiliateID: c.AffiliateID, AdvertiserID: c.AdvertiserID, ClickID: c.ClickID,
		ExternalID: "order-" + c.ClickID, OccurredAt: c.OccurredAt.Add(time.Duration(r.IntN(3600)) * time.Second),
		// "" is an event from before attribution existed: a click's.
		Attribution: []string{"", "click", "coupon", "customer"}[r.IntN(4)],
	}
	var out []events.Envelope
	previous := ""
	for i, status := range path {
		data.Status, data.PreviousStatus, data.Version = status, previous, int64(i+1)
		previous = status
		body, _ := json.Marshal(data)
		types := []string{events.CommissionStatusChanged}
		switch status {
		case events.CommissionPending:
			types = []string{events.ConversionCreated, events.CommissionStatusChanged}
		case events.CommissionApproved:
			types = []string{events.ConversionApproved, events.CommissionStatusChanged}
		case events.CommissionRejected:
			types = []string{events.ConversionRejected, events.CommissionStatusChanged}
		}
		for _, typ := range types {
			out = append(out, events.Envelope{ID: fmt.Sprintf("evt_%d_%d", n, len(out)), Type: typ, OccurredAt: data.OccurredAt,
				AdvertiserID: data.AdvertiserID, AffiliateID: data.AffiliateID, ProgramID: data.ProgramID, Data: body})
		}
	}
	return out
}

func (d dataset) clickMessages() []kafka.Record {
	out := make([]kafka.Record, len(d.clicks))
	for i, c := range d.clicks {
		b, _ := json.Marshal(c)
		out[i] = kafka.Record{Key: []byte(c.ClickID), Value: b}
	}
	return out
}

func (d dataset) eventMessages() []kafka.Record {
	out := make([]kafka.Record, len(d.events))
	for i, e := range d.events {
		b, _ := json.Marshal(e)
		key := e.ID
		var data events.ConversionData
		if json.Unmarshal(e.Data, &data) == nil && data.ID != "" {
			key = data.ID // the aggregate: a conversion's events share a partition
		}
		out[i] = kafka.Record{Key: []byte(key), Value: b}
	}
	return out
}

// distinctClicks is how many clicks (by id) the dataset holds.
func (d dataset) distinctClicks() int {
	seen := map[string]bool{}
	for _, c := range d.clicks {
		seen[c.ClickID] = true
	}
	return len(seen)
}

// expected computes the figures of docs/stats.md straight from the source events: the
// reference the rollups must equal.
func (d dataset) expected(scope company, g stats.GroupBy, from, to time.Time, currency string) map[string]stats.Row {
	mine := func(adv, aff string) bool {
		if scope.kind == identity.Advertiser {
			return adv == scope.id
		}
		return aff == scope.id
	}
	out := map[string]stats.Row{}
	row := func(at time.Time, program, affiliate, link, sub1, attribution string) (string, stats.Row) {
		var r stats.Row
		var key string
		switch g {
		case stats.Day:
			day := at.Truncate(24 * time.Hour)
			r.Day, key = day, day.Format(time.DateOnly)
		case stats.Hour:
			hour := at.Truncate(time.Hour)
			r.Hour, key = hour, hour.Format(time.RFC3339)
		case stats.Program:
			r.ProgramID, key = program, program
		case stats.Affiliate:
			r.AffiliateID, key = affiliate, affiliate
		case stats.Link:
			r.LinkID, r.ProgramID, r.AffiliateID, key = link, program, affiliate, link
		case stats.Sub1:
			r.Sub1, key = sub1, sub1
		case stats.Attribution:
			r.Attribution, key = attribution, attribution
		}
		if have, ok := out[key]; ok {
			return key, have
		}
		return key, r
	}
	inRange := func(t time.Time) bool { return !t.Before(from) && t.Before(to.AddDate(0, 0, 1)) }
	clicks := map[string]events.Click{}
	for _, c := range d.clicks {
		if _, dup := clicks[c.ClickID]; dup {
			continue
		}
		clicks[c.ClickID] = c
		// A click has no attribution: that grouping has conversions only.
		if c.IsBot || !mine(c.AdvertiserID, c.AffiliateID) || !inRange(c.OccurredAt) || g == stats.Attribution {
			continue
		}
		key, r := row(c.OccurredAt, c.ProgramID, c.AffiliateID, c.LinkID, c.Sub1, "")
		r.Clicks++
		if !c.IsDuplicate {
			r.UniqueClicks++
		}
		out[key] = r
	}
	latest := map[string]events.ConversionData{}
	var order []string
	for _, e := range d.events {
		var data events.ConversionData
		if e.Type == events.PartnershipCreated || json.Unmarshal(e.Data, &data) != nil {
			continue
		}
		have, ok := latest[data.ID]
		if !ok {
			order = append(order, data.ID)
		}
		if !ok || data.Version > have.Version {
			latest[data.ID] = data
		}
	}
	currencies := map[string]bool{}
	amounts := map[string]map[string]stats.Amount{} // row key -> currency -> amounts
	for _, id := range order {
		data := latest[id]
		if !mine(data.AdvertiserID, data.AffiliateID) || !inRange(data.OccurredAt) || (currency != "" && data.Currency != currency) {
			continue
		}
		currencies[data.Currency] = true
		click := clicks[data.ClickID]
		attribution := data.Attribution
		if attribution == "" {
			attribution = "click"
		}
		key, r := row(data.OccurredAt, data.ProgramID, data.AffiliateID, click.LinkID, click.Sub1, attribution)
		amount, _ := money.Parse(data.Amount, data.Currency)
		commission, _ := money.Parse(data.CommissionAmount, data.Currency)
		r.Conversions.Total++
		switch data.Status {
		case events.CommissionPending:
			r.Conversions.Pending++
		case events.CommissionApproved:
			r.Conversions.Approved++
		case events.CommissionRejected:
			r.Conversions.Rejected++
		case events.CommissionPaid:
			r.Conversions.Paid++
		case events.CommissionReversed:
			r.Conversions.Reversed++
		}
		if amounts[key] == nil {
			amounts[key] = map[string]stats.Amount{}
		}
		a := amounts[key][data.Currency]
		if data.Status == events.CommissionPending || data.Status == events.CommissionApproved || data.Status == events.CommissionPaid {
			a.SaleAmount = a.SaleAmount.Add(money.SumOf(amount))
			a.Commission = a.Commission.Add(money.SumOf(commission))
		}
		amounts[key][data.Currency] = a
		out[key] = r
	}
	if g == stats.Day || g == stats.Hour {
		step := 24 * time.Hour
		if g == stats.Hour {
			step = time.Hour
		}
		for at := from; at.Before(to.AddDate(0, 0, 1)); at = at.Add(step) {
			key, r := row(at, "", "", "", "", "")
			out[key] = r
		}
	}
	// Every row has the amounts of every currency of the range, sorted; with one currency
	// they are also the row's own.
	list := []string{currency}
	if currency == "" {
		list = nil
		for c := range currencies {
			list = append(list, c)
		}
		sort.Strings(list)
	}
	for k, r := range out {
		for _, c := range list {
			a := amounts[k][c]
			a.Currency = c
			r.Amounts = append(r.Amounts, a)
		}
		if len(list) == 1 {
			r.Currency, r.SaleAmount, r.Commission = list[0], r.Amounts[0].SaleAmount, r.Amounts[0].Commission
		}
		out[k] = r
	}
	return out
}

// ingestGroupings are the groupings the reference computes: all but those by where clicks
// come from, which the clicks here do not vary (internal/stats tests them).
var ingestGroupings = slices.DeleteFunc(slices.Clone(stats.Groupings), func(g stats.GroupBy) bool {
	return slices.Contains(stats.OriginGroupings, g)
})

// assertFigures compares every grouping for every company with the reference.
func assertFigures(t testing.TB, conn driver.Conn, db string, d dataset) {
	t.Helper()
	assertFiguresBy(t, conn, db, d, ingestGroupings...)
}

// assertFiguresBy compares the groupings for every company with the reference.
func assertFiguresBy(t testing.TB, conn driver.Conn, db string, d dataset, groupings ...stats.GroupBy) {
	t.Helper()
	if diffs := figuresDiff(t, conn, db, d, groupings...); diffs != "" {
		t.Error(diffs)
	}
}

// figuresDiff tells how the groupings for every company differ from the reference, "" when
// they do not.
func figuresDiff(t testing.TB, conn driver.Conn, db string, d dataset, groupings ...stats.GroupBy) string {
	t.Helper()
	var diffs string
	q := stats.New(conn, db, stats.Options{})
	for _, co := range []company{advA, advB, affX, affY, affZ} {
		// The affiliates earn in EUR and USD: their amounts per currency, and in one.
		currencies := []string{""}
		if co.kind == identity.Affiliate {
			currencies = append(currencies, "EUR")
		}
		for _, g := range groupings {
			for _, currency := range currencies {
				rows, err := q.Query(context.Background(), stats.Scope{CompanyID: co.id, Kind: co.kind},
					stats.Params{From: rangeFrom, To: rangeTo, GroupBy: g, Currency: currency})
				if err != nil {
					t.Fatalf("%s by %s: %v", co.id, g, err)
				}
				got := map[string]stats.Row{}
				for _, r := range rows {
					got[rowKey(g, r)] = r
				}
				want := d.expected(co, g, rangeFrom, rangeTo, currency)
				if !reflect.DeepEqual(got, want) {
					diffs += fmt.Sprintf("%s by %s in %q:\n%s", co.id, g, currency, diff(got, want))
				}
			}
		}
	}
	return diffs
}

func rowKey(g stats.GroupBy, r stats.Row) string {
	switch g {
	case stats.Day:
		return r.Day.Format(time.DateOnly)
	case stats.Hour:
		return r.Hour.Format(time.RFC3339)
	case stats.Program:
		return r.ProgramID
	case stats.Affiliate:
		return r.AffiliateID
	case stats.Link:
		return r.LinkID
	case stats.Attribution:
		return r.Attribution
	}
	return r.Sub1
}

func diff(got, want map[string]stats.Row) string {
	keys := map[string]bool{}
	for k := range got {
		keys[k] = true
	}
	for k := range want {
		keys[k] = true
	}
	sorted := make([]string, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)
	var s string
	for _, k := range sorted {
		if !reflect.DeepEqual(got[k], want[k]) {
			s += fmt.Sprintf("  %q\n    got  %+v\n    want %+v\n", k, got[k], want[k])
		}
	}
	return s
}
