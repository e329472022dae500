package httpapi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// A body of the wrong JSON types is answered in the API's words: the field's JSON path and
// the JSON types, never the Go type it would have been decoded into.
func TestDecodeErrorsNameJSONTypesNotGoTypes(t *testing.T) {
	s := newFuzzServer()
	cases := []struct{ body, detail string }{
		{`[]`, "the body must be a JSON object, not an array"},
		{`"x"`, "the body must be a JSON object, not a string"},
		{`{"name":1}`, `field "name" must be a string, not a number`},
		{`{"limit":"3"}`, `field "limit" must be a whole number in range, not a string`},
		{`{"limit":1e400}`, `field "limit" must be a whole number in range, not a number out of range`},
		{`{"public":"yes"}`, `field "public" must be true or false, not a string`},
		{`{"events":{}}`, `field "events" must be an array, not an object`},
		{`{"commission":5}`, `field "commission" must be an object, not a number`},
		{`{"commission":{"percent":"5"}}`, `field "commission.percent" must be a whole number in range, not a string`},
	}
	for _, c := range cases {
		req := httptest.NewRequest(http.MethodPost, "/fuzz/json", strings.NewReader(c.body))
		req.Header.Set("Content-Type", "application/json")
		var p struct{ Code, Detail string }
		if err := json.Unmarshal(s.do(t, req, http.StatusBadRequest), &p); err != nil || p.Code != "invalid_json" || p.Detail != c.detail {
			t.Errorf("body %s: %s %q, want invalid_json %q", c.body, p.Code, p.Detail, c.detail)
		}
	}
}
