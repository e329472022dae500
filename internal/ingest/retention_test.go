package ingest

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/partnerstream/partnerstream/internal/events"
	"github.com/partnerstream/partnerstream/internal/identity"
	"github.com/partnerstream/partnerstream/internal/stats"
)

func TestRetentionDropsRawMonthsPastThePeriodAndKeepsTheRollups(t *testing.T) {
	t.Parallel()
	w, q := newWriterDB(t)
	ctx := context.Background()
	now := time.Date(2026, 11, 27, 8, 0, 0, 0, time.UTC)
	w.now = func() time.Time { return now }
	// With 13 months the first month kept is October 2025.
	lastDropped, firstKept := time.Date(2025, 9, 30, 23, 59, 0, 0, time.UTC), time.Date(2025, 10, 1, 0, 0, 0, 0, time.UTC)
	at := map[string]time.Time{"clk_old": lastDropped, "clk_kept": firstKept, "clk_twodays": now.AddDate(0, 0, -2), "clk_now": now}
	var clicks []Click
	var convs []Conversion
	for id, ts := range at {
		c := click(id)
		c.OccurredAt, c.Visitor = ts, "v_"+id
		clicks = append(clicks, c)
		cv := conversion(1, events.CommissionPending)
		cv.ID, cv.EventID, cv.ClickID, cv.OccurredAt = "cnv_"+id, "evt_"+id, id, ts
		convs = append(convs, cv)
	}
	if _, err := w.WriteClicks(ctx, clicks); err != nil {
		t.Fatal(err)
	}
	if _, err := w.WriteConversions(ctx, convs); err != nil {
		t.Fatal(err)
	}

	r := retention{w: w, months: 13, log: slog.New(slog.DiscardHandler)}
	for range 2 { // a second run finds nothing more to drop
		if err := r.drop(ctx); err != nil {
			t.Fatal(err)
		}
	}
	ids := func(query string) map[string]bool {
		t.Helper()
		rows, err := w.conn.Query(ctx, query)
		if err != nil {
			t.Fatal(err)
		}
		got, err := scanStrings(rows)
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]bool{}
		for _, id := range got {
			m[id] = true
		}
		return m
	}
	kept := map[string]bool{"clk_kept": true, "clk_twodays": true, "clk_now": true}
	for table, query := range map[string]string{
		"clicks":             "SELECT click_id FROM " + w.db + ".clicks",
		"click_index":        "SELECT click_id FROM " + w.db + ".click_index",
		"conversion_changes": "SELECT click_id FROM " + w.db + ".conversion_changes",
	} {
		if got := ids(query); len(got) != len(kept) || !got["clk_kept"] || !got["clk_twodays"] || !got["clk_now"] {
			t.Errorf("%s holds %v, want %v", table, got, kept)
		}
	}
	// The clicks' narrow copy (ClickHouse migration 0017) has no click id: its rows and first time.
	var narrow uint64
	var first time.Time
	if err := w.conn.QueryRow(ctx, "SELECT count(), min(occurred_at) FROM "+w.db+".clicks_narrow").Scan(&narrow, &first); err != nil {
		t.Fatal(err)
	}
	if narrow != uint64(len(kept)) || !first.Equal(firstKept) {
		t.Errorf("clicks_narrow holds %d clicks from %s, want %d from %s", narrow, first, len(kept), firstKept)
	}
	if got := ids("SELECT click_id FROM " + w.db + ".click_visitors"); len(got) != 1 || !got["clk_now"] {
		t.Errorf("click_visitors holds %v, want only today's click", got)
	}
	// The rollups still count the dropped month, and a conversion's state stays.
	rows, err := q.Query(ctx, stats.Scope{CompanyID: "co_adv", Kind: identity.Advertiser},
		stats.Params{From: lastDropped, To: lastDropped, GroupBy: stats.Day})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0].Clicks != 1 || rows[0].Conversions.Total != 1 {
		t.Errorf("the rollups of the dropped month read %+v, want 1 click and 1 conversion", rows)
	}
	if got := ids("SELECT conversion_id FROM " + w.db + ".conversions"); !got["cnv_clk_old"] {
		t.Errorf("conversions lost the state of a conversion of a dropped month: %v", got)
	}
}

func TestRetentionWithoutAPeriodKeepsEveryRawMonth(t *testing.T) {
	t.Parallel()
	w, _ := newWriterDB(t)
	ctx := context.Background()
	w.now = func() time.Time { return time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC) }
	c := click("clk_1")
	if _, err := w.WriteClicks(ctx, []Click{c}); err != nil {
		t.Fatal(err)
	}
	if err := (retention{w: w, log: slog.New(slog.DiscardHandler)}).drop(ctx); err != nil {
		t.Fatal(err)
	}
	rows, err := w.conn.Query(ctx, "SELECT click_id FROM "+w.db+".clicks")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := scanStrings(rows); err != nil || len(got) != 1 {
		t.Errorf("clicks holds %v (%v), want the click", got, err)
	}
}

func TestRawCutoffIsTheFirstMonthKept(t *testing.T) {
	for _, c := range []struct {
		now    time.Time
		months int
		want   string
	}{
		{time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC), 13, "2025-10"},
		{time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), 1, "2025-12"},
		{time.Date(2026, 3, 31, 23, 0, 0, 0, time.UTC), 2, "2026-01"},
	} {
		if got := rawCutoff(c.now, c.months).Format("2006-01"); got != c.want {
			t.Errorf("rawCutoff(%s, %d) = %s, want %s", c.now, c.months, got, c.want)
		}
	}
}
