package httpapi_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
	"sigs.k8s.io/yaml"

	"github.com/partnerstream/partnerstream/internal/health"
	"github.com/partnerstream/partnerstream/internal/httpapi"
)

var (
	specOnce   sync.Once
	specDoc    *openapi3.T
	specRouter routers.Router
	specErr    error
)

func spec(t *testing.T) (*openapi3.T, routers.Router) {
	t.Helper()
	specOnce.Do(func() {
		var doc []byte
		if doc, specErr = httpapi.OpenAPI(); specErr != nil {
			return
		}
		specDoc, specErr = openapi3.NewLoader().LoadFromData(doc)
		if specErr != nil {
			return
		}
		if specErr = specDoc.Validate(context.Background()); specErr != nil {
			return
		}
		specRouter, specErr = gorillamux.NewRouter(specDoc)
	})
	if specErr != nil {
		t.Fatalf("openapi.yaml: %v", specErr)
	}
	return specDoc, specRouter
}

// checkAgainstSpec validates a real response against the documented operation, when the
// request matches one (requests to undocumented paths are the router test's business).
func checkAgainstSpec(t *testing.T, req *http.Request, status int, header http.Header, body []byte) {
	t.Helper()
	_, router := spec(t)
	r := req.Clone(context.Background())
	r.URL.Scheme, r.URL.Host, r.Host = "", "", ""
	route, params, err := router.FindRoute(r)
	if err != nil {
		return
	}
	in := &openapi3filter.RequestValidationInput{Request: r, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, ExcludeRequestBody: true}}
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: status, Header: header,
		Body: io.NopCloser(bytes.NewReader(body)), Options: &openapi3filter.Options{IncludeResponseStatus: true}}
	if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
		t.Errorf("%s %s -> %d does not match openapi.yaml: %v", req.Method, req.URL.Path, status, err)
	}
}

// everyArea is a server with every area of the API mounted, as the api component mounts them.
// Mounting only registers routes, so no dependency is needed.
func everyArea() *httpapi.Server {
	srv := httpapi.New(httpapi.Options{Addr: "127.0.0.1:0", Log: quiet, Health: health.NewRegistry()})
	srv.MountAuth(nil, nil, nil, false)
	srv.MountAPIKeys(nil)
	srv.MountPrograms(nil)
	srv.MountPartnerships(nil)
	srv.MountProfiles(nil)
	srv.MountOnboarding(nil)
	srv.MountTracking(nil, nil, httpapi.TrackingOptions{})
	srv.MountConversions(nil)
	srv.MountPayouts(nil)
	srv.MountFraud(nil)
	srv.MountFraudReview(httpapi.FraudReview{})
	srv.MountRates(nil, httpapi.RatesOptions{})
	srv.MountConversionPostback(nil)
	srv.MountIntegrations(nil)
	srv.MountScript(nil)
	srv.MountStats(nil)
	srv.MountExports(nil, nil)
	srv.MountWebhooks(nil)
	srv.MountPostbacks(nil)
	srv.MountDeliveries(nil, nil, httpapi.DeliveriesOptions{})
	srv.MountAccount(nil)
	srv.MountPeople(nil)
	return srv
}

func TestEveryRouteIsDocumentedAndEveryDocumentedRouteExists(t *testing.T) {
	srv := everyArea()
	doc, _ := spec(t)
	documented := map[string]bool{}
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			documented[method+" "+path] = true
		}
	}
	served := routesOf(srv)
	var missing, undocumented []string
	for k := range documented {
		if !served[k] {
			missing = append(missing, k)
		}
	}
	for k := range served {
		if !documented[k] {
			undocumented = append(undocumented, k)
		}
	}
	sort.Strings(missing)
	sort.Strings(undocumented)
	if len(missing)+len(undocumented) > 0 {
		t.Fatalf("documented but not served: %v\nserved but not documented: %v", missing, undocumented)
	}
}

func TestOpenAPIIsServedWithoutCredentials(t *testing.T) {
	f := newFakeFixture(t)
	resp, err := f.srv.App().Test(httptest.NewRequest("GET", "/openapi.json", nil))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !bytes.Contains(body, []byte(`"openapi":"3.0.3"`)) {
		t.Fatalf("GET /openapi.json = %d %.100s", resp.StatusCode, body)
	}
}

// routesOf lists a server's routes as "METHOD /path/{param}", the OpenAPI spelling.
func routesOf(srv *httpapi.Server) map[string]bool {
	out := map[string]bool{}
	for _, r := range srv.App().GetRoutes(true) {
		if r.Method == "HEAD" {
			continue
		}
		path := r.Path
		for _, seg := range strings.Split(path, "/") {
			if strings.HasPrefix(seg, ":") {
				path = strings.Replace(path, seg, "{"+seg[1:]+"}", 1)
			}
		}
		out[r.Method+" "+path] = true
	}
	return out
}

// assertAreaDocumented checks that the routes mount adds to a fixture's are exactly the
// paths of the area's OpenAPI fragment. Mounting only registers routes: mount may pass nil
// services.
func assertAreaDocumented(t *testing.T, mount func(*httpapi.Server), fragment string) {
	t.Helper()
	base := routesOf(newFakeFixture(t).srv)
	area := newFakeFixture(t)
	mount(area.srv)
	var added []string
	for r := range routesOf(area.srv) {
		if !base[r] {
			added = append(added, r)
		}
	}
	raw, err := os.ReadFile(fragment)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Paths map[string]map[string]any `json:"paths"`
	}
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	var documented []string
	for path, ops := range doc.Paths {
		for method := range ops {
			if method != "parameters" {
				documented = append(documented, strings.ToUpper(method)+" "+path)
			}
		}
	}
	slices.Sort(added)
	slices.Sort(documented)
	if !slices.Equal(added, documented) {
		t.Fatalf("mounted %v\ndocumented %v", added, documented)
	}
}
