package stats_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/partnerstream/partnerstream/internal/events"
	"github.com/partnerstream/partnerstream/internal/identity"
	"github.com/partnerstream/partnerstream/internal/ingest"
	"github.com/partnerstream/partnerstream/internal/money"
	"github.com/partnerstream/partnerstream/internal/stats"
	"github.com/partnerstream/partnerstream/internal/testenv/chtest"
)

var today = time.Date(2026, 6, 30, 18, 30, 0, 0, time.UTC)

func date(s string) time.Time {
	t, err := time.Parse(time.DateOnly, s)
	if err != nil {
		panic(err)
	}
	return t
}

func TestResolveFillsDefaultsAndRejectsBadRanges(t *testing.T) {
	t.Parallel()
	s := stats.New(nil, "unused", stats.Options{Now: func() time.Time { return today }})
	tests := []struct {
		name     string
		in       stats.Params
		from, to string
		field    string // of the expected error; empty means valid
		says     string
	}{
		{"nothing given is the last 30 days by day", stats.Params{}, "2026-06-01", "2026-06-30", "", ""},
		{"a lone from runs to today", stats.Params{From: date("2026-06-20")}, "2026-06-20", "2026-06-30", "", ""},
		{"a lone to starts 29 days before", stats.Params{To: date("2026-03-31")}, "2026-03-02", "2026-03-31", "", ""},
		{"the time of day is ignored", stats.Params{From: date("2026-06-01").Add(23 * time.Hour), To: date("2026-06-02").Add(time.Hour)}, "2026-06-01", "2026-06-02", "", ""},
		{"one day is a range", stats.Params{From: date("2026-06-01"), To: date("2026-06-01")}, "2026-06-01", "2026-06-01", "", ""},
		{"400 days are allowed", stats.Params{From: date("2025-05-27"), To: date("2026-06-30")}, "2025-05-27", "2026-06-30", "", ""},
		{"401 days are not", stats.Params{From: date("2025-05-26"), To: date("2026-06-30")}, "", "", "to", "spans 401 days; at most 400"},
		{"from after to is refused", stats.Params{From: date("2026-06-02"), To: date("2026-06-01")}, "", "", "from", "2026-06-02 is after to (2026-06-01)"},
		{"a lone from after today is refused", stats.Params{From: date("2026-07-01")}, "", "", "from", "is after to"},
		{"an unknown grouping is refused", stats.Params{GroupBy: "week"}, "", "", "group_by", `unknown grouping "week"`},
		{"a currency must be ISO 4217", stats.Params{Currency: "eur"}, "", "", "currency", "ISO 4217"},
		{"a day beyond 2099 is refused: ClickHouse's dates end in 2106", stats.Params{From: date("9999-12-01"), To: date("9999-12-31")}, "", "", "from", "from 2000-01-01 to 2099-12-31"},
		{"a day before 2000 is refused", stats.Params{From: date("1969-12-31"), To: date("1970-01-01")}, "", "", "from", "from 2000-01-01 to 2099-12-31"},
		{"the last day of 2099 is a range", stats.Params{From: date("2099-12-01"), To: date("2099-12-31")}, "2099-12-01", "2099-12-31", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := s.Resolve(tt.in)
			if tt.field != "" {
				var pe *stats.ParamError
				if !errors.As(err, &pe) || pe.Field != tt.field || !strings.Contains(pe.Message, tt.says) {
					t.Fatalf("err = %v, want a %s error saying %q", err, tt.field, tt.says)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if f, to := got.From.Format(time.DateOnly), got.To.Format(time.DateOnly); f != tt.from || to != tt.to || got.GroupBy != stats.Day && tt.in.GroupBy == "" {
				t.Errorf("resolved to %s..%s by %s, want %s..%s", f, to, got.GroupBy, tt.from, tt.to)
			}
		})
	}
}

func TestEPCAndConversionRate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		row  stats.Row
		epc  money.Sum
		rate float64
	}{
		{"no clicks earn nothing per click", stats.Row{Commission: money.SumOf(500), Conversions: stats.Conversions{Approved: 1, Total: 1}}, money.Sum{}, 0},
		{"commission per click rounds half up", stats.Row{Clicks: 4, Commission: money.SumOf(1250), Conversions: stats.Conversions{Pending: 1, Total: 1}}, money.SumOf(313), 0.25},
		{"below half rounds down", stats.Row{Clicks: 3, Commission: money.SumOf(1000), Conversions: stats.Conversions{Paid: 1, Total: 1}}, money.SumOf(333), 0.3333},
		{"rejected and reversed conversions do not convert", stats.Row{Clicks: 10, Conversions: stats.Conversions{Approved: 1, Rejected: 2, Reversed: 3, Total: 6}}, money.Sum{}, 0.1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.row.EPC(); got != tt.epc {
				t.Errorf("EPC = %s, want %s", got, tt.epc)
			}
			if got := tt.row.ConversionRate(); got != tt.rate {
				t.Errorf("conversion rate = %v, want %v", got, tt.rate)
			}
		})
	}
}

// seeded is a migrated database with two advertisers' traffic, written the way ingest writes.
func seeded(t *testing.T) *stats.Service {
	t.Helper()
	ctx := context.Background()
	_, db, conn := chtest.Migrated(t)
	w := ingest.NewWriter(conn, db)
	var clicks []ingest.Click
	add := func(n int, day, adv, aff, program, link string) {
		for i := range n {
			clicks = append(clicks, ingest.Click{Click: events.Click{ClickID: fmt.Sprintf("clk_%s_%s_%d", day, link, i),
				OccurredAt: date(day).Add(time.Hour), LinkID: link, ProgramID: program, AffiliateID: aff, AdvertiserID: adv}})
		}
	}
	add(5, "2026-06-10", "co_a", "co_x", "prg_a1", "lnk_a1x")
	add(2, "2026-06-10", "co_a", "co_y", "prg_a2", "lnk_a2y")
	add(3, "2026-06-12", "co_a", "co_x", "prg_a2", "lnk_a2x")
	add(9, "2026-06-10", "co_b", "co_x", "prg_b1", "lnk_b1x")
	if _, err := w.WriteClicks(ctx, clicks); err != nil {
		t.Fatal(err)
	}
	conv := func(id, day, adv, aff, program, link, currency, status string, commission int64) ingest.Conversion {
		attribution := "click"
		if link == "" {
			attribution = "coupon"
		}
		return ingest.Conversion{EventID: "evt_" + id, ID: id, Version: 1, Status: status, Currency: currency, Amount: commission * 10,
			Commission: commission, OccurredAt: date(day).Add(2 * time.Hour), AdvertiserID: adv, ProgramID: program, AffiliateID: aff, LinkID: link,
			Attribution: attribution}
	}
	_, err := w.WriteConversions(ctx, []ingest.Conversion{
		conv("cnv_1", "2026-06-10", "co_a", "co_x", "prg_a1", "lnk_a1x", "EUR", events.CommissionApproved, 700),
		conv("cnv_2", "2026-06-12", "co_a", "co_x", "prg_a2", "lnk_a2x", "EUR", events.CommissionPending, 300),
		conv("cnv_3", "2026-06-10", "co_b", "co_x", "prg_b1", "lnk_b1x", "USD", events.CommissionPaid, 900),
		conv("cnv_4", "2026-06-11", "co_a", "co_y", "prg_a2", "", "EUR", events.CommissionPending, 50),
	})
	if err != nil {
		t.Fatal(err)
	}
	// The coupon conversion is rejected later: it leaves its attribution's earning figures.
	rejected := conv("cnv_4", "2026-06-11", "co_a", "co_y", "prg_a2", "", "EUR", events.CommissionRejected, 50)
	rejected.Version, rejected.EventID = 2, "evt_cnv_4_2"
	if _, err := w.WriteConversions(ctx, []ingest.Conversion{rejected}); err != nil {
		t.Fatal(err)
	}
	return stats.New(conn, db, stats.Options{Now: func() time.Time { return today }})
}

func TestQueryGroupsScopesAndOrdersRows(t *testing.T) {
	t.Parallel()
	s := seeded(t)
	advA := stats.Scope{CompanyID: "co_a", Kind: identity.Advertiser}
	affX := stats.Scope{CompanyID: "co_x", Kind: identity.Affiliate}
	tests := []struct {
		name  string
		scope stats.Scope
		p     stats.Params
		want  string // the rows, one "key:clicks/conversions/commission currency" each
	}{
		{"an advertiser by day gets every day, zeros included", advA, stats.Params{From: date("2026-06-09"), To: date("2026-06-12")},
			"2026-06-09:0/0/0 EUR 2026-06-10:7/1/700 EUR 2026-06-11:0/1/0 EUR 2026-06-12:3/1/300 EUR"},
		{"an advertiser by program, most clicks first", advA, stats.Params{From: date("2026-06-01"), To: date("2026-06-30"), GroupBy: stats.Program},
			"prg_a1:5/1/700 EUR prg_a2:5/2/300 EUR"},
		{"an advertiser by affiliate", advA, stats.Params{From: date("2026-06-01"), To: date("2026-06-30"), GroupBy: stats.Affiliate},
			"co_x:8/2/1000 EUR co_y:2/1/0 EUR"},
		{"a program filter narrows the rows", advA, stats.Params{From: date("2026-06-01"), To: date("2026-06-30"), GroupBy: stats.Link, ProgramID: "prg_a2"},
			"lnk_a2x:3/1/300 EUR lnk_a2y:2/0/0 EUR prg_a2co_y:0/1/0 EUR"},
		{"an affiliate sees its traffic at every advertiser, in one currency", affX, stats.Params{From: date("2026-06-01"), To: date("2026-06-30"), GroupBy: stats.Program, Currency: "USD"},
			"prg_b1:9/1/900 USD prg_a1:5/0/0 USD prg_a2:3/0/0 USD"},
		{"an advertiser by attribution: conversions only, no clicks", advA, stats.Params{From: date("2026-06-01"), To: date("2026-06-30"), GroupBy: stats.Attribution},
			"click:0/2/1000 EUR coupon:0/1/0 EUR"},
		{"a range outside the traffic is empty", advA, stats.Params{From: date("2026-05-01"), To: date("2026-05-31"), GroupBy: stats.Sub1}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rows, err := s.Query(context.Background(), tt.scope, tt.p)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, r := range rows {
				k := r.ProgramID + r.AffiliateID + r.Sub1 + r.Attribution
				switch {
				case !r.Day.IsZero():
					k = r.Day.Format(time.DateOnly)
				case r.LinkID != "":
					k = r.LinkID
				}
				got = append(got, fmt.Sprintf("%s:%d/%d/%s %s", k, r.Clicks, r.Conversions.Total, r.Commission, r.Currency))
			}
			if g := strings.Join(got, " "); g != tt.want {
				t.Errorf("rows\n got  %s\n want %s", g, tt.want)
			}
		})
	}
}

// An affiliate earning in two currencies gets its amounts per currency, in every row, and
// its conversions counted once.
func TestQueryKeepsAmountsPerCurrency(t *testing.T) {
	t.Parallel()
	s := seeded(t)
	rows, err := s.Query(context.Background(), stats.Scope{CompanyID: "co_x", Kind: identity.Affiliate},
		stats.Params{From: date("2026-06-10"), To: date("2026-06-12")})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rows {
		row := fmt.Sprintf("%s:%d/%d", r.Day.Format("02"), r.Clicks, r.Conversions.Total)
		for _, a := range r.Amounts {
			row += fmt.Sprintf(" %s %s", a.Commission, a.Currency)
		}
		if r.Currency != "" || r.Commission != (money.Sum{}) {
			row += " mixed " + r.Currency
		}
		got = append(got, row)
	}
	if g := strings.Join(got, ", "); g != "10:14/2 700 EUR 900 USD, 11:0/0 0 EUR 0 USD, 12:3/1 300 EUR 0 USD" {
		t.Fatalf("rows %s", g)
	}
	total := stats.Total(rows)
	if total.Clicks != 17 || total.Conversions.Total != 3 || len(total.Amounts) != 2 || total.Amounts[0].Commission != money.SumOf(1000) ||
		total.Amounts[1].Commission != money.SumOf(900) || total.Amounts[1].EPC(total.Clicks) != money.SumOf(53) {
		t.Fatalf("total %+v", total)
	}
}

func TestQueryRefusesWhatItCannotAnswer(t *testing.T) {
	t.Parallel()
	s := seeded(t)
	june := stats.Params{From: date("2026-06-01"), To: date("2026-06-30")}
	var pe *stats.ParamError
	for _, scope := range []stats.Scope{{CompanyID: "co_a", Kind: "admin"}, {Kind: identity.Advertiser}} {
		if _, err := s.Query(context.Background(), scope, june); !errors.Is(err, stats.ErrScope) {
			t.Errorf("scope %+v: %v, want ErrScope", scope, err)
		}
	}
	if _, err := s.Query(context.Background(), stats.Scope{CompanyID: "co_a", Kind: identity.Advertiser}, stats.Params{GroupBy: "week"}); !errors.As(err, &pe) {
		t.Errorf("an unknown grouping: %v, want a ParamError", err)
	}
}
