package httpapi

import (
	"net"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fasthttp"
)

// clientIP is the redirect's c.IP() in fewer allocations: the same text for every kind of
// peer address.
func TestClientIPIsFibersIP(t *testing.T) {
	app := fiber.New(fiber.Config{EnableTrustedProxyCheck: true})
	for _, ip := range []string{"127.0.0.1", "203.0.113.9", "::1", "2001:db8::1:0:0:1", "::ffff:192.0.2.7", "fe80::1"} {
		var fctx fasthttp.RequestCtx
		var req fasthttp.Request
		req.SetRequestURI("/c/x")
		fctx.Init(&req, &net.TCPAddr{IP: net.ParseIP(ip), Port: 1234}, nil)
		c := app.AcquireCtx(&fctx)
		if got, want := clientIP(c), c.IP(); got != want {
			t.Errorf("%s: clientIP %q, c.IP() %q", ip, got, want)
		}
		app.ReleaseCtx(c)
	}
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
