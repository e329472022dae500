package ingest

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/partnerstream/partnerstream/internal/events"
)

// viaEncodingJSON is what encoding/json reads into events.Click, without the fields ingest
// skips.
func viaEncodingJSON(data []byte) (events.Click, error) {
	var c events.Click
	err := json.Unmarshal(data, &c)
	return stored(c), err
}

// stored is c without the fields ingest does not store.
func stored(c events.Click) events.Click {
	for f := range events.NumClickFields {
		if takes[f] == skip {
			reflect.ValueOf(c.Field(f)).Elem().SetZero()
		}
	}
	return c
}

// parseClick is the parser's record as an events.Click, to compare with encoding/json's.
func (cp *clickParser) parseClick(data []byte) (events.Click, error) {
	var r clickRecord
	if err := cp.parse(data, &r); err != nil {
		return events.Click{}, err
	}
	return r.click(), nil
}

// click is the record as an events.Click.
func (r *clickRecord) click() events.Click {
	var c events.Click
	for f := range events.NumClickFields {
		switch takes[f] {
		case takeString, takeInput:
			*c.Field(f).(*string) = r.field(f)
		case takeTime:
			*c.Field(f).(*time.Time) = r.at
		case takeBool:
			*c.Field(f).(*bool) = r.bools[f]
		}
	}
	return c
}

func TestClickParserReadsWhatEncodingJSONReads(t *testing.T) {
	full, err := json.Marshal(benchClick(3, time.Date(2026, 11, 22, 10, 4, 5, 123456789, time.UTC)))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, json string
	}{
		{"a click as the redirect writes it", string(full)},
		{"keys in another order, with every optional field",
			`{"is_duplicate":true,"sub5":"e","sub4":"d","sub3":"c","sub2":"b","sub1":"a","promotion_id":"prm_1",` +
				`"country":"ES","referrer":"https://r.example","user_agent":"UA","ip":"::1","advertiser_id":"co_a",` +
				`"affiliate_id":"co_f","program_id":"prg_1","link_id":"lnk_1","occurred_at":"2026-01-02T03:04:05+01:00",` +
				`"click_id":"clk_1","is_bot":true}`},
		{"escaped strings", `{"click_id":"clk_\u00e9\"\\\/\n","user_agent":"Mozilla \u2028 \ud83d\ude00","referrer":"a\tb"}`},
		{"null values leave fields empty", `{"click_id":null,"occurred_at":null,"is_bot":null,"sub1":null,"ip":"1.2.3.4"}`},
		{"unknown and nested fields are skipped", `{"extra":{"a":[1,2,{"b":null}]},"click_id":"clk_2","n":1.5e3,"landing_url":"https://x"}`},
		{"a repeated key keeps its last value", `{"click_id":"clk_1","click_id":"clk_2","is_bot":true,"is_bot":false}`},
		{"an empty object", `{}`},
		{"white space everywhere", " {\n\t\"click_id\" : \"clk_3\" ,\r\n \"is_bot\" : true } "},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			want, err := viaEncodingJSON([]byte(tc.json))
			if err != nil {
				t.Fatalf("encoding/json refuses the case: %v", err)
			}
			var p clickParser
			got, err := p.parseClick([]byte(tc.json))
			if err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Errorf("parsed\n%+v\nencoding/json reads\n%+v", got, want)
			}
		})
	}
}

func TestClickParserRefusesWhatEncodingJSONRefuses(t *testing.T) {
	for name, data := range map[string]string{
		"not JSON":                      `{"click_id":`,
		"an array":                      `[{"click_id":"clk_1"}]`,
		"a number for a string":         `{"click_id":42}`,
		"an object for a string":        `{"sub1":{"a":"b"}}`,
		"a string for a flag":           `{"is_bot":"true"}`,
		"a time that is not RFC 3339":   `{"occurred_at":"22/11/2026"}`,
		"a number for the time":         `{"occurred_at":1700000000}`,
		"trailing bytes after the body": `{"click_id":"clk_1"} x`,
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := viaEncodingJSON([]byte(data)); err == nil {
				t.Fatalf("encoding/json accepts %s", data)
			}
			var p clickParser
			if c, err := p.parseClick([]byte(data)); err == nil {
				t.Errorf("parsed %s as %+v", data, c)
			}
		})
	}
}

// A parser reused for many messages keeps nothing of one in the next.
func TestClickParserReuseLeavesNoTrace(t *testing.T) {
	var p clickParser
	if _, err := p.parseClick([]byte(`{"click_id":"clk_1","sub1":"first","is_bot":true,"occurred_at":"2026-01-01T00:00:00Z"}`)); err != nil {
		t.Fatal(err)
	}
	got, err := p.parseClick([]byte(`{"click_id":"clk_2"}`))
	if err != nil {
		t.Fatal(err)
	}
	if want := (events.Click{ClickID: "clk_2"}); got != want {
		t.Errorf("second parse = %+v, want %+v", got, want)
	}
}

// FuzzClickParser: whatever a message holds, the parser does not panic, and where
// encoding/json reads the same input it reads the same click. Inputs outside the platform's
// own encoding are not compared: keys that match a field only in another case (encoding/json
// folds case), and invalid UTF-8 or lone surrogate escapes (encoding/json writes U+FFFD).
func FuzzClickParser(f *testing.F) {
	full, _ := json.Marshal(benchClick(3, time.Date(2026, 11, 22, 10, 4, 5, 0, time.UTC)))
	f.Add(full)
	f.Add([]byte(`{"click_id":"clk_\u00e9","is_bot":null,"x":[{}]}`))
	f.Add([]byte(`{"occurred_at":"2026-01-02T03:04:05.5-07:00","sub1":"\ud83d\ude00"}`))
	f.Add([]byte(`{"click_id":"a","click_id":null,"x":true,"is_bot":false,"sub1":"\u0041\n\/","y":"z"}`))
	f.Add([]byte("{\"click_id\":\"a\tb\",\"ip\":\"\xff\"}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		sameViaScanAndTree(t, data)
		var p clickParser
		got, err := p.parseClick(data)
		want, jerr := viaEncodingJSON(data)
		if err != nil || jerr != nil || !comparable(data) {
			return
		}
		if got != want {
			t.Errorf("%s:\nparsed %+v\nencoding/json reads %+v", data, got, want)
		}
	})
}

// sameViaScanAndTree: what scan takes, fastjson reads the same.
func sameViaScanAndTree(t *testing.T, data []byte) {
	t.Helper()
	var p clickParser
	p.arena = make([]byte, 0, len(data))
	var scanned clickRecord
	if !p.scan(data, &scanned, 0) {
		return
	}
	p.seal(&scanned, 0)
	q := clickParser{arena: make([]byte, 0, len(data))}
	var tree clickRecord
	if err := q.parseTree(data, &tree, 0); err != nil {
		t.Fatalf("%q: scanned, but fastjson refuses it: %v", data, err)
	}
	a, b := scanned.click(), tree.click()
	sameTime := a.OccurredAt.Equal(b.OccurredAt)
	if a.OccurredAt = b.OccurredAt; !sameTime || a != b {
		t.Errorf("%q: scanned %+v, fastjson reads %+v", data, a, b)
	}
}

func comparable(data []byte) bool {
	if !utf8.Valid(data) || strings.Contains(strings.ToLower(string(data)), `\ud`) {
		return false
	}
	var keys map[string]json.RawMessage
	if json.Unmarshal(data, &keys) != nil {
		return false
	}
	for k := range keys {
		for _, f := range events.ClickFields {
			if k != f.JSON && strings.EqualFold(k, f.JSON) {
				return false
			}
		}
	}
	return true
}

// BenchmarkDecodeClick: the parser beside encoding/json decoding the same click in the
// same run.
func BenchmarkDecodeClick(b *testing.B) {
	body, _ := json.Marshal(benchClick(7, time.Now().UTC()))
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			if _, err := viaEncodingJSON(body); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("parser", func(b *testing.B) {
		b.ReportAllocs()
		var p clickParser
		var r clickRecord
		for range b.N {
			if err := p.parse(body, &r); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// The clicks' strings are views of the parser's arenas: parsing more clicks, over several
// arenas and with failures in between, must leave the ones parsed before as they were.
func TestClickParserKeepsEarlierClicks(t *testing.T) {
	var p clickParser
	var got []events.Click
	var want []events.Click
	at := time.Date(2026, 11, 22, 10, 4, 5, 0, time.UTC)
	for i := 0; len(want) < 3*arenaSize/250; i++ {
		if _, err := p.parseClick([]byte(`{"click_id":"clk_bad","is_bot":"yes"}`)); err == nil {
			t.Fatal("a malformed click parsed")
		}
		c := stored(benchClick(i, at))
		body, _ := json.Marshal(c)
		parsed, err := p.parseClick(body)
		if err != nil {
			t.Fatal(err)
		}
		got, want = append(got, parsed), append(want, c)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("click %d reads %+v after more were parsed, want %+v", i, got[i], want[i])
		}
	}
}

// Once enriched, a click's landing URL gives its bytes back to the arena when it is the
// click's last string, and only then: the records before keep every field whatever the
// following clicks write there.
func TestForgetGivesTheLandingURLBackToTheArena(t *testing.T) {
	at := time.Date(2026, 11, 22, 10, 4, 5, 0, time.UTC)
	last, err := json.Marshal(benchClick(1, at)) // the landing URL last, as the platform writes it
	if err != nil {
		t.Fatal(err)
	}
	c := benchClick(2, at)
	first := []byte(`{"landing_url":"` + c.LandingURL + `","click_id":"` + c.ClickID + `","advertiser_id":"a","occurred_at":"2026-11-22T10:04:05Z"}`)
	emptyAfter := []byte(`{"click_id":"c3","advertiser_id":"a","occurred_at":"2026-11-22T10:04:05Z","landing_url":"https://x.example/?utm_source=s","sub2":""}`)
	var cp clickParser
	var recs []clickRecord
	var want []events.Click
	for i, msg := range [][]byte{last, first, emptyAfter, last} {
		var r clickRecord
		if err := cp.parse(msg, &r); err != nil {
			t.Fatal(err)
		}
		before, landing := len(cp.arena), r.field(events.FieldLandingURL)
		cp.forget(&r, events.FieldLandingURL)
		w, err := viaEncodingJSON(msg)
		if err != nil {
			t.Fatal(err)
		}
		if forgotten := i == 0 || i == 3; forgotten {
			w.LandingURL = ""
			if len(cp.arena) != before-len(landing) || r.field(events.FieldLandingURL) != "" {
				t.Errorf("click %d: the arena went from %d to %d bytes, its landing URL is %q; want %d bytes and none", i, before, len(cp.arena), r.field(events.FieldLandingURL), before-len(landing))
			}
		} else if len(cp.arena) != before || r.field(events.FieldLandingURL) != landing {
			t.Errorf("click %d: a landing URL that is not its last string was forgotten", i)
		}
		recs, want = append(recs, r), append(want, w)
	}
	for i := range recs {
		if got := recs[i].click(); got != want[i] {
			t.Errorf("click %d after the others: %+v, want %+v", i, got, want[i])
		}
	}
}
