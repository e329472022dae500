package httpapi_test

import (
	"net/http/httptest"
	"testing"

	"github.com/partnerstream/partnerstream/internal/metrics"
)

// Request metrics must stay gatherable whatever the requests were: a label value that
// pointed into Fiber's reused buffers once turned a GET's series into "GETT" and every scrape
// into an error.
func TestRequestMetricsStayGatherableAfterMixedMethods(t *testing.T) {
	f := newFakeFixture(t)
	for range 20 {
		for _, m := range []string{"POST", "GET", "DELETE", "PATCH", "PROPFIND"} {
			req := httptest.NewRequest(m, "/api/v1/programs", nil)
			req.Header.Set("Authorization", "Bearer "+f.adv)
			res, err := f.srv.App().Test(req, -1)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
		}
	}
	families, err := metrics.Gatherer.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	for _, mf := range families {
		if mf.GetName() != "partnerstream_http_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				switch v := l.GetValue(); {
				case l.GetName() != "method":
				case v == "GET", v == "POST", v == "DELETE", v == "PATCH", v == "HEAD", v == "PUT", v == "OPTIONS", v == "OTHER":
				default:
					t.Errorf("method label %q", v)
				}
			}
		}
	}
}
