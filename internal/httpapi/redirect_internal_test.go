package httpapi

import (
	"net"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fasthttp"

	"github.com/partnerstream/partnerstream/internal/clientaddr"
)

// With no proxy trusted, clientIP is c.IP() in fewer allocations: the same text for every
// kind of peer address, whatever X-Forwarded-For says.
func TestClientIPIsFibersIP(t *testing.T) {
	app := fiber.New(fiber.Config{EnableTrustedProxyCheck: true})
	for _, ip := range []string{"127.0.0.1", "203.0.113.9", "::1", "2001:db8::1:0:0:1", "::ffff:192.0.2.7", "fe80::1"} {
		c := peerCtx(app, ip, "198.51.100.1")
		if got, want := clientIP(c, clientaddr.Trusted{}), c.IP(); got != want {
			t.Errorf("%s: clientIP %q, c.IP() %q", ip, got, want)
		}
		app.ReleaseCtx(c)
	}
}

// Behind trusted proxies clientIP reads every X-Forwarded-For header, from the right.
func TestClientIPBehindTrustedProxies(t *testing.T) {
	trusted, err := clientaddr.Parse([]string{"10.0.0.0/8"})
	if err != nil {
		t.Fatal(err)
	}
	app := fiber.New(fiber.Config{EnableTrustedProxyCheck: true})
	for _, tc := range []struct {
		name, peer string
		xff        []string
		want       string
	}{
		{"a trusted peer's header names the client", "10.1.2.3", []string{"203.0.113.5"}, "203.0.113.5"},
		{"an untrusted peer's header is ignored", "198.51.100.7", []string{"203.0.113.5"}, "198.51.100.7"},
		{"a forged first header is passed over", "::ffff:10.1.2.3", []string{"1.2.3.4", "203.0.113.5, 10.9.9.9"}, "203.0.113.5"},
		{"a malformed header leaves the peer", "10.1.2.3", []string{"203.0.113.5, not-an-address"}, "10.1.2.3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := peerCtx(app, tc.peer, tc.xff...)
			defer app.ReleaseCtx(c)
			if got := clientIP(c, trusted); got != tc.want {
				t.Errorf("clientIP = %q, want %q", got, tc.want)
			}
		})
	}
}

// peerCtx is a click request from the peer address ip with the X-Forwarded-For headers.
func peerCtx(app *fiber.App, ip string, xff ...string) *fiber.Ctx {
	var fctx fasthttp.RequestCtx
	var req fasthttp.Request
	req.SetRequestURI("/c/x")
	for _, v := range xff {
		req.Header.Add(fiber.HeaderXForwardedFor, v)
	}
	fctx.Init(&req, &net.TCPAddr{IP: net.ParseIP(ip), Port: 1234}, nil)
	return app.AcquireCtx(&fctx)
}

// The redirect writes its cookies from pre-built bytes: they must be what fiber.Cookie
// writes for the same cookie, secure or not.
func TestPrebuiltCookiesMatchFiber(t *testing.T) {
	for _, secure := range []bool{false, true} {
		for _, c := range []struct {
			name, path, value string
			age               time.Duration
		}{
			{VisitorCookie, "/c/", "AAAAAAAAAAAAAAAAAAAAAA", visitorCookieAge},
			{ClickCookie, "/", "clk_06f2d1x0k8m9q06f2d1x0k8m9q06f2d1x0k8m9q06f2d1x0k8m9q06f2d1x0", clickCookieAge},
		} {
			pre := newCookieHeader(c.name, c.path, c.age, secure)
			app := fiber.New()
			app.Get("/fiber", func(ctx *fiber.Ctx) error {
				ctx.Cookie(&fiber.Cookie{Name: c.name, Value: c.value, Path: c.path, MaxAge: int(c.age.Seconds()), Secure: secure, HTTPOnly: true,
					SameSite: fiber.CookieSameSiteLaxMode})
				return nil
			})
			app.Get("/prebuilt", func(ctx *fiber.Ctx) error {
				setCookie(ctx, pre, c.value)
				return nil
			})
			get := func(path string) []string {
				res, err := app.Test(httptest.NewRequest("GET", path, nil), -1)
				if err != nil {
					t.Fatal(err)
				}
				res.Body.Close()
				return res.Header.Values("Set-Cookie")
			}
			want, got := get("/fiber"), get("/prebuilt")
			if len(want) != 1 || len(got) != 1 || got[0] != want[0] {
				t.Fatalf("%s secure=%v: pre-built %q, fiber.Cookie %q", c.name, secure, got, want)
			}
		}
	}
}
