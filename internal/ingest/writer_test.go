package ingest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/partnerstream/partnerstream/internal/events"
	"github.com/partnerstream/partnerstream/internal/identity"
	"github.com/partnerstream/partnerstream/internal/money"
	"github.com/partnerstream/partnerstream/internal/stats"
	"github.com/partnerstream/partnerstream/internal/testenv/chtest"
)

// newWriterDB is a migrated database without Kafka, for the writer alone.
func newWriterDB(t *testing.T) (*Writer, *stats.Service) {
	t.Helper()
	_, db, conn := chtest.Migrated(t)
	return NewWriter(conn, db), stats.New(conn, db, stats.Options{})
}

var day1 = time.Date(2026, 3, 14, 9, 0, 0, 0, time.UTC)

func click(id string) Click {
	return Click{Click: events.Click{ClickID: id, OccurredAt: day1, LinkID: "lnk_1", ProgramID: "prg_1",
		AffiliateID: "co_aff", AdvertiserID: "co_adv", Sub1: "email", UserAgent: "Mozilla/5.0"}}
}

// totals reads the advertiser's figures for day1.
func totals(t *testing.T, q *stats.Service, g stats.GroupBy) []stats.Row {
	t.Helper()
	rows, err := q.Query(context.Background(), stats.Scope{CompanyID: "co_adv", Kind: identity.Advertiser},
		stats.Params{From: day1, To: day1, GroupBy: g})
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

func TestWriteClicksStoresEachClickOnce(t *testing.T) {
	t.Parallel()
	w, q := newWriterDB(t)
	steps := []struct {
		name  string
		batch []Click
		want  WriteResult
	}{
		{"a batch holding a click twice stores it once", []Click{click("clk_1"), click("clk_1"), click("clk_2")}, WriteResult{Written: 2, Duplicates: 1}},
		{"the same clicks again store nothing", []Click{click("clk_2"), click("clk_1")}, WriteResult{Duplicates: 2}},
		{"a redelivery cut differently stores only the new click", []Click{click("clk_2"), click("clk_3")}, WriteResult{Written: 1, Duplicates: 1}},
		{"an empty batch is fine", nil, WriteResult{}},
	}
	for _, s := range steps {
		got, err := w.WriteClicks(context.Background(), s.batch)
		if err != nil || got != s.want {
			t.Fatalf("%s: got %+v, %v; want %+v", s.name, got, err, s.want)
		}
	}
	if rows := totals(t, q, stats.Day); rows[0].Clicks != 3 || rows[0].UniqueClicks != 3 {
		t.Errorf("day figures %+v, want 3 clicks and 3 unique", rows[0])
	}
}

func TestClicksFlaggedByTheTrackerCountAsTheDocsSay(t *testing.T) {
	t.Parallel()
	w, q := newWriterDB(t)
	bot, repeat := click("clk_bot"), click("clk_repeat")
	bot.IsBot = true
	repeat.IsDuplicate = true
	if _, err := w.WriteClicks(context.Background(), []Click{click("clk_1"), bot, repeat}); err != nil {
		t.Fatal(err)
	}
	r := totals(t, q, stats.Day)[0]
	if r.Clicks != 2 || r.UniqueClicks != 1 {
		t.Errorf("got %d clicks, %d unique; want 2 (bots left out) and 1 (repeats left out)", r.Clicks, r.UniqueClicks)
	}
}

func conversion(version uint64, status string) Conversion {
	return Conversion{EventID: "evt_" + status, ID: "cnv_1", Version: version, Status: status, Type: "sale", Currency: "EUR",
		Amount: 10000, Commission: 1000, OccurredAt: day1.Add(time.Hour), AdvertiserID: "co_adv", ProgramID: "prg_1",
		AffiliateID: "co_aff", ClickID: "clk_1"}
}

func TestWriteConversionsCountsEachConversionInItsNewestStatus(t *testing.T) {
	t.Parallel()
	w, q := newWriterDB(t)
	if _, err := w.WriteClicks(context.Background(), []Click{click("clk_1")}); err != nil {
		t.Fatal(err)
	}
	type figures struct {
		pending, approved, paid, reversed int64
		commission                        money.Sum
	}
	steps := []struct {
		name  string
		batch []Conversion
		want  WriteResult
		then  figures
	}{
		{"a new conversion counts as pending", []Conversion{conversion(1, events.CommissionPending)},
			WriteResult{Written: 1}, figures{pending: 1, commission: money.SumOf(1000)}},
		{"its event delivered again changes nothing", []Conversion{conversion(1, events.CommissionPending)},
			WriteResult{Duplicates: 1}, figures{pending: 1, commission: money.SumOf(1000)}},
		{"a later version arriving first moves it", []Conversion{conversion(3, events.CommissionPaid)},
			WriteResult{Written: 1}, figures{paid: 1, commission: money.SumOf(1000)}},
		{"the older version arriving late is ignored", []Conversion{conversion(2, events.CommissionApproved)},
			WriteResult{Duplicates: 1}, figures{paid: 1, commission: money.SumOf(1000)}},
		{"in one batch the newest version wins", []Conversion{conversion(4, events.CommissionReversed), conversion(2, events.CommissionApproved), conversion(4, events.CommissionReversed)},
			WriteResult{Written: 1, Duplicates: 2}, figures{reversed: 1}},
	}
	for _, s := range steps {
		got, err := w.WriteConversions(context.Background(), s.batch)
		if err != nil || got != s.want {
			t.Fatalf("%s: got %+v, %v; want %+v", s.name, got, err, s.want)
		}
		r := totals(t, q, stats.Day)[0]
		c := r.Conversions
		if have := (figures{c.Pending, c.Approved, c.Paid, c.Reversed, r.Commission}); have != s.then || c.Total != 1 {
			t.Fatalf("%s: figures %+v (total %d), want %+v (total 1)", s.name, have, c.Total, s.then)
		}
	}
}

func TestConversionsTakeTheLinkAndSub1OfTheirClick(t *testing.T) {
	t.Parallel()
	w, q := newWriterDB(t)
	ctx := context.Background()
	if _, err := w.WriteClicks(ctx, []Click{click("clk_1")}); err != nil {
		t.Fatal(err)
	}
	fromEvent := conversion(1, events.CommissionPending)
	fromEvent.ID, fromEvent.Sub1, fromEvent.LinkID = "cnv_2", "given", "lnk_given"
	noClick := conversion(1, events.CommissionPending)
	noClick.ID, noClick.ClickID = "cnv_3", "clk_unknown"
	if _, err := w.WriteConversions(ctx, []Conversion{conversion(1, events.CommissionPending), fromEvent, noClick}); err != nil {
		t.Fatal(err)
	}
	// A status change keeps the attribution the conversion started with.
	if _, err := w.WriteConversions(ctx, []Conversion{conversion(2, events.CommissionApproved)}); err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, r := range totals(t, q, stats.Sub1) {
		got[r.Sub1] = r.Conversions.Total
	}
	if want := map[string]int64{"email": 1, "given": 1, "": 1}; !equalMaps(got, want) {
		t.Errorf("conversions by sub1 = %v, want %v", got, want)
	}
	got = map[string]int64{}
	for _, r := range totals(t, q, stats.Link) {
		got[r.LinkID] = r.Conversions.Total
	}
	if want := map[string]int64{"lnk_1": 1, "lnk_given": 1, "": 1}; !equalMaps(got, want) {
		t.Errorf("conversions by link = %v, want %v", got, want)
	}
}

func equalMaps(a, b map[string]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func TestParseConversion(t *testing.T) {
	t.Parallel()
	data := func(edit func(*events.ConversionData)) json.RawMessage {
		d := events.ConversionData{ID: "cnv_1", Type: "sale", Amount: "120.50", Status: "approved", Currency: "EUR",
			CommissionAmount: "12.05", ProgramID: "prg_1", AffiliateID: "co_aff", AdvertiserID: "co_adv", ClickID: "clk_1",
			OccurredAt: day1, Version: 2}
		if edit != nil {
			edit(&d)
		}
		b, _ := json.Marshal(d)
		return b
	}
	env := func(typ string, d json.RawMessage) events.Envelope {
		return events.Envelope{ID: "evt_1", Type: typ, OccurredAt: day1, AdvertiserID: "co_adv", Data: d}
	}
	tests := []struct {
		name    string
		in      events.Envelope
		ok      bool
		invalid string // substring of the error; empty means valid
		check   func(Conversion) bool
	}{
		{"an approval carries amounts in minor units and the version", env(events.ConversionApproved, data(nil)), true, "",
			func(c Conversion) bool {
				return c.Amount == 12050 && c.Commission == 1205 && c.Version == 2 && c.EventID == "evt_1"
			}},
		{"a status change event carries the same state", env(events.CommissionStatusChanged, data(nil)), true, "",
			func(c Conversion) bool { return c.Status == "approved" }},
		{"a lead without a sale amount counts zero", env(events.ConversionCreated, data(func(d *events.ConversionData) { d.Amount = "" })), true, "",
			func(c Conversion) bool { return c.Amount == 0 }},
		{"a zero-decimal currency reads whole units", env(events.ConversionCreated, data(func(d *events.ConversionData) { d.Currency, d.Amount, d.CommissionAmount = "JPY", "1500", "150" })), true, "",
			func(c Conversion) bool { return c.Amount == 1500 && c.Commission == 150 }},
		{"sub1 is read when the event carries it", env(events.ConversionCreated, json.RawMessage(`{"id":"cnv_1","status":"pending","currency":"EUR","amount":"1","commission_amount":"1","advertiser_id":"co_adv","sub1":"s"}`)), true, "",
			func(c Conversion) bool { return c.Sub1 == "s" }},
		{"a time before 2000, stored before the API refused it, counts on a day no report reaches",
			env(events.ConversionCreated, data(func(d *events.ConversionData) { d.OccurredAt = time.Date(1969, 12, 31, 23, 59, 59, 0, time.UTC) })), true, "",
			func(c Conversion) bool { return c.OccurredAt.Equal(time.Unix(0, 0)) }},
		{"a time past 2099 likewise", env(events.ConversionCreated, data(func(d *events.ConversionData) { d.OccurredAt = time.Date(2106, 3, 1, 0, 0, 0, 0, time.UTC) })), true, "",
			func(c Conversion) bool { return c.OccurredAt.Equal(time.Unix(0, 0)) }},
		{"a click's arrival names the conversion and the click's link and sub1",
			events.Envelope{ID: "evt_2", Type: events.ClickArrived, Data: json.RawMessage(`{"conversion_id":"cnv_1","click_id":"clk_1","link_id":"lnk_1","sub1":"s","since":"2026-03-14T09:00:00Z"}`)}, true, "",
			func(c Conversion) bool {
				return c.ClickArrived && c.ID == "cnv_1" && c.ClickID == "clk_1" && c.LinkID == "lnk_1" && c.Sub1 == "s" && c.AwaitingSince.Equal(day1)
			}},
		{"a click's arrival without a conversion is invalid", env(events.ClickArrived, json.RawMessage(`{"click_id":"clk_1"}`)), true, "conversion id", nil},
		{"a partnership is not for statistics", env(events.PartnershipCreated, json.RawMessage(`{"id":"ptn_1"}`)), false, "", nil},
		{"an amount with too many decimals is invalid", env(events.ConversionCreated, data(func(d *events.ConversionData) { d.Amount = "1.005" })), true, "amount", nil},
		{"an unknown currency is invalid", env(events.ConversionCreated, data(func(d *events.ConversionData) { d.Currency = "XXX" })), true, "amount", nil},
		{"a missing conversion id is invalid", env(events.ConversionCreated, data(func(d *events.ConversionData) { d.ID = "" })), true, "conversion id", nil},
		{"a negative version is invalid", env(events.ConversionCreated, data(func(d *events.ConversionData) { d.Version = -1 })), true, "version", nil},
		{"data that is not an object is invalid", env(events.ConversionCreated, json.RawMessage(`[1]`)), true, "data", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, ok, err := ParseConversion(tt.in)
			if ok != tt.ok {
				t.Fatalf("ok = %v, want %v", ok, tt.ok)
			}
			if tt.invalid != "" {
				if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.invalid) {
					t.Fatalf("err = %v, want ErrInvalid mentioning %q", err, tt.invalid)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tt.check != nil && !tt.check(c) {
				t.Errorf("parsed %+v", c)
			}
		})
	}
}

// Ingest plans a batch while the one before it is still being inserted: what that batch
// inserts must count as stored, although the lookup cannot see it yet.
func TestAPlanCountsWhatThePlanBeforeItInsertsAsStored(t *testing.T) {
	t.Parallel()
	w, q := newWriterDB(t)
	ctx := context.Background()

	first, err := w.planClicks(ctx, []clickRecord{newClickRecord(click("clk_1")), newClickRecord(click("clk_2"))}, nil)
	if err != nil {
		t.Fatal(err)
	}
	second, err := w.planClicks(ctx, []clickRecord{newClickRecord(click("clk_2")), newClickRecord(click("clk_3"))}, first)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := second.result(), (WriteResult{Written: 1, Duplicates: 1}); got != want {
		t.Errorf("second click plan: %+v, want %+v", got, want)
	}

	pending, err := w.planConversions(ctx, []Conversion{conversion(1, events.CommissionPending)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	approved, err := w.planConversions(ctx, []Conversion{conversion(1, events.CommissionPending), conversion(2, events.CommissionApproved)}, pending)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := approved.result(), (WriteResult{Written: 1, Duplicates: 1}); got != want {
		t.Errorf("second conversion plan: %+v, want %+v", got, want)
	}

	for _, p := range []plan{first, second, pending, approved} {
		if err := p.apply(ctx); err != nil {
			t.Fatal(err)
		}
	}
	r := totals(t, q, stats.Day)[0]
	if r.Clicks != 3 || r.Conversions.Total != 1 || r.Conversions.Approved != 1 || r.Conversions.Pending != 0 || r.Commission != money.SumOf(1000) {
		t.Errorf("figures %+v, want 3 clicks and one approved conversion (commission 1000)", r)
	}
}

// A batch larger than insertChunk goes as several blocks of one INSERT: every click arrives,
// in order, and ClickHouse stores them as one part per table as it does one block.
func TestABatchOfSeveralBlocksIsOneInsert(t *testing.T) {
	t.Parallel()
	_, db, conn := chtest.Migrated(t)
	w := NewWriter(conn, db)
	clicks := make([]Click, 2*insertChunk+3)
	for i := range clicks {
		clicks[i] = click(fmt.Sprintf("clk_%06d", i))
		clicks[i].Offset = int64(i)
	}
	res, err := w.WriteClicks(context.Background(), clicks)
	if err != nil || res != (WriteResult{Written: len(clicks)}) {
		t.Fatalf("WriteClicks = %+v, %v", res, err)
	}
	var n, ordered uint64
	if err := conn.QueryRow(context.Background(), "SELECT count(), countIf(toInt64(substring(click_id, 5)) = kafka_offset) FROM "+db+".clicks").Scan(&n, &ordered); err != nil {
		t.Fatal(err)
	}
	if n != uint64(len(clicks)) || ordered != n {
		t.Errorf("%d clicks stored, %d with their own offset; want %d", n, ordered, len(clicks))
	}
	for _, table := range []string{"clicks", "click_index", "clicks_daily"} {
		var parts uint64
		if err := conn.QueryRow(context.Background(), "SELECT count() FROM system.parts WHERE database = ? AND table = ?", db, table).Scan(&parts); err != nil {
			t.Fatal(err)
		}
		if parts != 1 {
			t.Errorf("%s has %d parts after one insert, want 1", table, parts)
		}
	}
}
