package conversions

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"
)

// validate is the first gate of every conversion (the JSON API and the /postback URL): it
// never panics, and what it lets through meets the rules the later steps rely on.
func FuzzValidate(f *testing.F) {
	f.Add("clk_01m814cmepq0a8s4ngqz6yb5bd", "order-1", "sale", "42.50", "EUR", int64(0), []byte(`{"a":1}`))
	f.Add("clk_", "", "refund", "-1", "eur", int64(1<<62), []byte(`[]`))
	f.Add("cnv_01m814cmepq0a8s4ngqz6yb5bd", "x\x00y", "", "", "", int64(-1), []byte(`null`))
	f.Add("clk_01m814cmepq0a8s4ngqz6yb5bd", "order\r\n1", "sale", "1", "EUR", int64(-1), []byte(`{}`))
	f.Add("clk_01m814cmepq0a8s4ngqz6yb5bd", "order-2", "sale", "1", "EUR", int64(-2208988800), []byte(`{}`))
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	s := New(nil, Options{Now: func() time.Time { return now }})
	f.Fuzz(func(t *testing.T, clickID, externalID, typ, amount, currency string, occurredUnix int64, metadata []byte) {
		in := NewConversion{ClickID: clickID, ExternalID: externalID, Type: typ, Amount: amount, Currency: currency, Metadata: metadata}
		if occurredUnix != 0 {
			in.OccurredAt = time.Unix(occurredUnix%(1<<40), 0)
		}
		if err := s.validate(&in, now); err != nil {
			return
		}
		switch {
		case in.ExternalID == "" || utf8.RuneCountInString(in.ExternalID) > 255 || !utf8.ValidString(in.ExternalID) ||
			strings.IndexFunc(in.ExternalID, unicode.IsControl) >= 0:
			t.Fatalf("accepted external_id %q", in.ExternalID)
		case !slices.Contains(Types, in.Type):
			t.Fatalf("accepted type %q", in.Type)
		case in.OccurredAt.Year() < 2000 || in.OccurredAt.Location() != time.UTC || in.OccurredAt.After(now.Add(s.skew)):
			t.Fatalf("accepted occurred_at %v", in.OccurredAt)
		case in.Amount == "" || in.Source == "":
			t.Fatalf("left defaults unset: %+v", in)
		}
		var obj map[string]json.RawMessage
		if json.Unmarshal(in.Metadata, &obj) != nil || obj == nil || len(in.Metadata) > MaxMetadata {
			t.Fatalf("accepted metadata %q", in.Metadata)
		}
	})
}

// commissionAmount turns a rule and a sale into a commission: it never overflows into a
// negative amount, and a percentage of at most 100 % never pays more than the sale.
func FuzzCommissionAmount(f *testing.F) {
	f.Add("percent", int64(1250), int64(4250))
	f.Add("percent", int64(10000), int64(1<<62))
	f.Add("fixed", int64(500), int64(0))
	f.Fuzz(func(t *testing.T, rule string, value, amount int64) {
		if value < 0 || amount < 0 || (rule == "percent" && value > 10000) {
			return // refused before: rules are validated when stored, amounts by money.Parse
		}
		got, err := commissionAmount(rule, value, amount)
		if err != nil {
			return
		}
		if got < 0 {
			t.Fatalf("commissionAmount(%q, %d, %d) = %d", rule, value, amount, got)
		}
		if rule == "percent" && got > amount {
			t.Fatalf("%d bps of %d is %d, more than the sale", value, amount, got)
		}
	})
}
