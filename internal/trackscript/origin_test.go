package trackscript_test

import (
	"testing"

	"github.com/partnerstream/partnerstream/internal/trackscript"
)

func TestOriginsAreNormalisedAndMatchedExactly(t *testing.T) {
	for in, want := range map[string]string{
		"HTTPS://Shop.Example":     "https://shop.example",
		"https://shop.example:443": "https://shop.example",
		"http://127.0.0.1:8080/":   "http://127.0.0.1:8080",
		"https://*.shop.example":   "https://*.shop.example",
		"http://[::1]:3000":        "http://[::1]:3000",
	} {
		if got, err := trackscript.NormalizeOrigin(in); err != nil || got != want {
			t.Errorf("NormalizeOrigin(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "shop.example", "ftp://shop.example", "https://shop.example/path", "https://shop.example?x=1",
		"https://user@shop.example", "https://a.*.example", "https://*", "javascript:alert(1)"} {
		if got, err := trackscript.NormalizeOrigin(bad); err == nil {
			t.Errorf("NormalizeOrigin(%q) = %q, want an error", bad, got)
		}
	}
	st := trackscript.Settings{Origins: []string{"https://shop.example", "https://*.brand.example", "http://127.0.0.1:8080"}}
	for origin, want := range map[string]bool{
		"https://shop.example":       true,
		"https://SHOP.example:443":   true,
		"http://shop.example":        false, // another scheme is another origin
		"https://www.shop.example":   false,
		"https://www.brand.example":  true,
		"https://a.b.brand.example":  true,
		"https://brand.example":      false, // a wildcard is for subdomains only
		"https://evilbrand.example":  false,
		"https://brand.example.evil": false,
		"http://www.brand.example":   false,
		"http://127.0.0.1:8080":      true,
		"http://127.0.0.1:8081":      false,
		"null":                       false,
		"":                           false,
		"https://*.brand.example":    false, // a pattern is not an origin
	} {
		if got := st.Allowed(origin); got != want {
			t.Errorf("Allowed(%q) = %v, want %v", origin, got, want)
		}
	}
}
