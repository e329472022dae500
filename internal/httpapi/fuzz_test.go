package httpapi

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/partnerstream/partnerstream/internal/conversions"
	"github.com/partnerstream/partnerstream/internal/health"
	"github.com/partnerstream/partnerstream/internal/programs"
)

// fuzzServer is the api server with its error handling, plus routes that decode exactly as
// the real handlers do, and the public /postback URL backed by a service that records what it
// was given.
type fuzzServer struct {
	srv      *Server
	postback *fuzzPostbacks
}

// fuzzInput has the field types the API's bodies use.
type fuzzInput struct {
	Name     string          `json:"name"`
	Amount   json.RawMessage `json:"amount"`
	Limit    int             `json:"limit"`
	Hold     *int            `json:"hold_days"`
	Public   bool            `json:"public"`
	Events   []string        `json:"events"`
	Metadata json.RawMessage `json:"metadata"`
	Rule     *fuzzRule       `json:"commission"`
	Starts   time.Time       `json:"starts_at"`
}

type fuzzRule struct {
	Type    string                   `json:"type"`
	Percent programs.Optional[int64] `json:"percent"`
}

// goTypeWords are what a problem would show of a Go type instead of the API's words.
var goTypeWords = regexp.MustCompile(`httpapi\.|programs\.|fuzz|int64|float64|\[\]|map\[|struct|\*`)

type fuzzPostbacks struct{ got *conversions.NewConversion }

func (f *fuzzPostbacks) RegisterPostback(_ context.Context, token string, in conversions.NewConversion, _ func(string) error) (conversions.Conversion, bool, error) {
	if token == "" {
		panic("RegisterPostback without a token")
	}
	f.got = &in
	return conversions.Conversion{ID: "cnv_1", ExternalID: in.ExternalID}, true, nil
}

func (f *fuzzPostbacks) RotatePostbackToken(context.Context, string, string) (string, error) {
	return "", nil
}

func newFuzzServer() *fuzzServer {
	srv := New(Options{Addr: "127.0.0.1:0", Log: slog.New(slog.DiscardHandler), Health: health.NewRegistry()})
	srv.app.Post("/fuzz/json", func(c *fiber.Ctx) error {
		var in fuzzInput
		if err := DecodeJSON(c, &in); err != nil {
			return err
		}
		return c.JSON(in)
	})
	srv.app.Get("/fuzz/page", func(c *fiber.Ctx) error {
		p, err := PageRequest(c)
		if err != nil {
			return err
		}
		return c.JSON(fiber.Map{"limit": p.Limit, "before": p.Before})
	})
	pb := &fuzzPostbacks{}
	srv.MountConversionPostback(pb)
	return &fuzzServer{srv: srv, postback: pb}
}

// do sends a request and checks what every answer must be: no 5xx, and every error an RFC
// 9457 problem.
func (f *fuzzServer) do(t *testing.T, req *http.Request, allowed ...int) []byte {
	t.Helper()
	resp, err := f.srv.app.Test(req, 5000)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	ok := false
	for _, s := range allowed {
		ok = ok || resp.StatusCode == s
	}
	if !ok {
		t.Fatalf("%s %s: status %d: %s", req.Method, req.URL, resp.StatusCode, body)
	}
	if resp.StatusCode >= 400 && !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/problem+json") {
		t.Fatalf("%s %s: error %d is %s, not a problem: %s", req.Method, req.URL, resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	return body
}

// DecodeJSON reads every request body: any bytes and content type give the decoded value, a
// 400 or a 415, never a 500, and a problem's detail speaks JSON, never of Go types.
func FuzzDecodeJSON(f *testing.F) {
	for _, seed := range []struct{ body, ct string }{
		{`{"name":"x","amount":"42.50","limit":3,"hold_days":null,"events":["a"],"metadata":{"k":[1,2]}}`, "application/json"},
		{`{"name":1}`, "application/json"}, {`{"unknown":1}`, "application/json"}, {`{} {}`, "application/json"},
		{``, ""}, {`[`, "application/json; charset=utf-8"}, {`{"limit":1e400}`, "application/json"}, {`{}`, "text/plain"},
		{`{"name":"\ud800"}`, "application/json"}, {`null`, "application/json"},
		{`[]`, "application/json"}, {`"x"`, "application/json"}, {`{"commission":5}`, "application/json"},
		{`{"commission":{"percent":"5"}}`, "application/json"}, {`{"events":{}}`, "application/json"},
		{`{"name":"A","name":"B"}`, "application/json"}, {`{"metadata":{"k":[{"x":1,"x":2}]}}`, "application/json"},
		{`{"name":"a","NAME":"b"}`, "application/json"},
	} {
		f.Add([]byte(seed.body), seed.ct)
	}
	s := newFuzzServer()
	f.Fuzz(func(t *testing.T, body []byte, contentType string) {
		req := httptest.NewRequest(http.MethodPost, "/fuzz/json", strings.NewReader(string(body)))
		if contentType != "" {
			req.Header.Set("Content-Type", contentType)
		}
		answer := s.do(t, req, http.StatusOK, http.StatusBadRequest, http.StatusUnsupportedMediaType, http.StatusRequestEntityTooLarge)
		var p struct{ Status int }
		if json.Unmarshal(answer, &p) == nil && p.Status == 0 && keysLost(body) {
			t.Fatalf("body %s has a repeated key and was accepted", body)
		}
		if json.Unmarshal(answer, &p) == nil && p.Status >= 400 {
			if w := goTypeWords.Find(answer); w != nil {
				t.Fatalf("body %q: the problem names %q of a Go type: %s", body, w, answer)
			}
		}
	})
}

// keysLost reports whether decoding body into maps loses or merges keys: a key repeated in
// one object, or two keys of one object that differ only in case. It re-encodes instead of
// tracking keys, unlike repeatedKey.
func keysLost(body []byte) bool {
	var v any
	if json.Unmarshal(body, &v) != nil {
		return false
	}
	again, err := json.Marshal(v)
	if err != nil {
		return false
	}
	return tokens(body) != tokens(again) || caseVariants(v)
}

func tokens(b []byte) int {
	dec := json.NewDecoder(strings.NewReader(string(b)))
	n := 0
	for {
		if _, err := dec.Token(); err != nil {
			return n
		}
		n++
	}
}

func caseVariants(v any) bool {
	switch v := v.(type) {
	case map[string]any:
		folded := map[string]bool{}
		for k, e := range v {
			if folded[strings.ToLower(k)] || caseVariants(e) {
				return true
			}
			folded[strings.ToLower(k)] = true
		}
	case []any:
		for _, e := range v {
			if caseVariants(e) {
				return true
			}
		}
	}
	return false
}

// Query strings reach PageRequest and the /postback URL as they come: any query gives a page,
// a 400, or (for /postback) what the service answers or a refusal, never a 500. What the
// service receives is exactly the query's values.
func FuzzQuery(f *testing.F) {
	for _, q := range []string{
		"limit=10&cursor=Y252XzAx", "limit=0", "limit=%ff", "cursor=%%", "limit=1&limit=2", "",
		"token=t&click_id=clk_1&external_id=o1&amount=42.50&currency=EUR&type=sale&occurred_at=2026-03-01T12:00:00Z",
		"token=&click_id=x", "token=t&occurred_at=yesterday", "token=t&amount=1e9&external_id=%00", "token=t;click_id=a",
	} {
		f.Add(q)
	}
	s := newFuzzServer()
	f.Fuzz(func(t *testing.T, rawQuery string) {
		if strings.ContainsAny(rawQuery, " #\r\n\t") || !utf8Printable(rawQuery) {
			return // not a request line a client can send
		}
		s.do(t, httptest.NewRequest(http.MethodGet, "/fuzz/page?"+rawQuery, nil), http.StatusOK, http.StatusBadRequest)

		s.postback.got = nil
		s.do(t, httptest.NewRequest(http.MethodGet, "/postback?"+rawQuery, nil), http.StatusOK, http.StatusBadRequest, http.StatusUnauthorized)
		got := s.postback.got
		if got == nil {
			return
		}
		v, err := url.ParseQuery(rawQuery)
		if err != nil {
			return // fasthttp and net/url disagree about malformed escapes; only Go's answer is checked
		}
		if got.ClickID != v.Get("click_id") || got.ExternalID != v.Get("external_id") || got.Amount != v.Get("amount") ||
			got.Currency != v.Get("currency") || got.Type != v.Get("type") {
			t.Fatalf("query %q reached the service as %+v", rawQuery, *got)
		}
	})
}

func utf8Printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] >= 0x7f {
			return false
		}
	}
	return true
}
