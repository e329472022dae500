package stats_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/partnerstream/partnerstream/internal/identity"
	"github.com/partnerstream/partnerstream/internal/stats"
)

func TestRowsStreamEveryGroupPerCurrencyInOrder(t *testing.T) {
	t.Parallel()
	s := seeded(t)
	advA := stats.Scope{CompanyID: "co_a", Kind: identity.Advertiser}
	affX := stats.Scope{CompanyID: "co_x", Kind: identity.Affiliate}
	june := func(g stats.GroupBy) stats.Params {
		return stats.Params{From: date("2026-06-01"), To: date("2026-06-30"), GroupBy: g}
	}
	tests := []struct {
		name  string
		scope stats.Scope
		p     stats.Params
		want  string // "key:clicks/conversions/commission currency" per row
	}{
		{"by day: every day, zeros included, in order", advA, stats.Params{From: date("2026-06-09"), To: date("2026-06-12")},
			"2026-06-09:0/0/0  2026-06-10:7/1/700 EUR 2026-06-11:0/1/0 EUR 2026-06-12:3/1/300 EUR"},
		{"by day in an asked currency", advA, stats.Params{From: date("2026-06-11"), To: date("2026-06-12"), Currency: "EUR"},
			"2026-06-11:0/1/0 EUR 2026-06-12:3/1/300 EUR"},
		{"an affiliate in two currencies gets a row per currency, no error", affX, stats.Params{From: date("2026-06-09"), To: date("2026-06-11")},
			"2026-06-09:0/0/0  2026-06-10:14/1/700 EUR 2026-06-10:14/1/900 USD 2026-06-11:0/0/0 "},
		{"by program, most clicks first, clicks repeated on each currency row", affX, june(stats.Program),
			"prg_b1:9/1/900 USD prg_a1:5/1/700 EUR prg_a2:3/1/300 EUR"},
		{"by affiliate", advA, june(stats.Affiliate),
			"co_x:8/2/1000 EUR co_y:2/1/0 EUR"},
		{"by link with its program and affiliate; a coupon's conversions have no link", advA, stats.Params{From: date("2026-06-01"), To: date("2026-06-30"), GroupBy: stats.Link, ProgramID: "prg_a2"},
			"lnk_a2x(prg_a2,co_x):3/1/300 EUR lnk_a2y(prg_a2,co_y):2/0/0  prg_a2co_y:0/1/0 EUR"},
		{"by sub1", advA, june(stats.Sub1), ":10/3/1000 EUR"},
		{"by attribution: conversions only, no clicks", advA, june(stats.Attribution), "click:0/2/1000 EUR coupon:0/1/0 EUR"},
		{"another company's traffic never appears", stats.Scope{CompanyID: "co_b", Kind: identity.Advertiser}, june(stats.Affiliate),
			"co_x:9/1/900 USD"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rows, err := s.Rows(context.Background(), tt.scope, tt.p)
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			var got []string
			for rows.Next() {
				r := rows.Value()
				k := r.ProgramID + r.AffiliateID + r.Sub1 + r.Attribution
				switch {
				case !r.Day.IsZero():
					k = r.Day.Format(time.DateOnly)
				case r.LinkID != "":
					k = fmt.Sprintf("%s(%s,%s)", r.LinkID, r.ProgramID, r.AffiliateID)
				}
				got = append(got, fmt.Sprintf("%s:%d/%d/%s %s", k, r.Clicks, r.Conversions.Total, r.Commission, r.Currency))
			}
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
			if g := strings.Join(got, " "); g != tt.want {
				t.Errorf("rows\n got  %s\n want %s", g, tt.want)
			}
		})
	}
}

func TestRowsRefuseWhatQueryRefuses(t *testing.T) {
	t.Parallel()
	s := stats.New(nil, "unused", stats.Options{Now: func() time.Time { return today }})
	if _, err := s.Rows(context.Background(), stats.Scope{CompanyID: "co_a", Kind: "admin"}, stats.Params{}); !errors.Is(err, stats.ErrScope) {
		t.Errorf("an admin scope: %v, want ErrScope", err)
	}
	var pe *stats.ParamError
	if _, err := s.Rows(context.Background(), stats.Scope{CompanyID: "co_a", Kind: identity.Advertiser}, stats.Params{GroupBy: "week"}); !errors.As(err, &pe) {
		t.Errorf("an unknown grouping: %v, want a ParamError", err)
	}
}
