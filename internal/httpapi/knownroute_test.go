package httpapi

import (
	"strings"
	"testing"

	"github.com/gofiber/fiber/v2"
)

// knownRoute matches routes by segment for speed; it must agree with Fiber's own matching.
func TestKnownRouteAgreesWithFibersMatching(t *testing.T) {
	s := New(Options{Addr: "127.0.0.1:0"})
	noop := func(c *fiber.Ctx) error { return nil }
	for _, p := range []string{"/api/v1/programs", "/api/v1/programs/:id", "/api/api-keys", "/openapi.json", "/app/*", "/c/:code", "/api/x/:a-:b", "/api/opt/:o?"} {
		s.app.Get(p, noop)
	}
	for _, path := range []string{"/api/v1/programs", "/api/v1/programs/", "/api/v1/programs/prg_1", "/api/v1/programs/prg_1/x", "/api/v1/program", "/api/api-keys", "/api/api-keys/",
		"/openapi.json", "/openapi_json", "/app", "/app/", "/app/a/b", "/c/abc", "/c/", "/c", "/api/x/1-2", "/api/x/12", "/api/opt", "/api/opt/1", "/API/api-keys", "/api/v2/programs", "/"} {
		// Fiber's router, unlike RoutePatternMatch, ignores a trailing slash.
		trimmed := path
		if len(path) > 1 {
			trimmed = strings.TrimSuffix(path, "/")
		}
		cfg := s.app.Config()
		want := false
		for _, r := range s.app.GetRoutes(true) {
			want = want || fiber.RoutePatternMatch(trimmed, r.Path, cfg)
		}
		if got := s.knownRoute(path); got != want {
			t.Errorf("knownRoute(%q) = %v, Fiber says %v", path, got, want)
		}
	}
}
