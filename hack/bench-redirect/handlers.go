package main

import (
	"context"
	"log/slog"
	"net"

	"github.com/gofiber/fiber/v2"

	"github.com/partnerstream/partnerstream/internal/health"
	"github.com/partnerstream/partnerstream/internal/httpapi"
)

// bareClickID has the length of a signed click id (clickid.Len), so the bare answer is as
// long as the real one.
const bareClickID = "clk_06f2d1x0k8m9q06f2d1x0k8m9q06f2d1x0k8m9q06f2d1x0k8m9q06f2d1x0"

// bareRedirect answers with the same 302 the real redirect sends (Location, headers and
// cookies), doing nothing else.
func bareRedirect(c *fiber.Ctx) error {
	c.Set(fiber.HeaderCacheControl, "no-store")
	c.Set("X-Robots-Tag", "noindex")
	c.Set("X-Request-Id", "req_06f2d1x0k8m9q0000000000000")
	c.Response().Header.Add(fiber.HeaderSetCookie, "ps_vid=AAAAAAAAAAAAAAAAAAAAAA; max-age=31536000; path=/c/; HttpOnly; SameSite=Lax")
	c.Response().Header.Add(fiber.HeaderSetCookie, "ps_click="+bareClickID+"; max-age=2592000; path=/; HttpOnly; SameSite=Lax")
	return c.Redirect("https://shop.example.com/landing?utm_source=affiliate&ps_click_id="+bareClickID, fiber.StatusFound)
}

// serveBare serves bareRedirect on a plain Fiber app.
func serveBare(ctx context.Context) (string, error) {
	app := fiber.New(fiber.Config{DisableStartupMessage: true})
	app.Get("/c/:code", bareRedirect)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	go func() { _ = app.Listener(ln) }()
	go func() { <-ctx.Done(); _ = app.Shutdown() }()
	return ln.Addr().String(), nil
}

// serveMiddleware serves bareRedirect behind the api server's middleware (request id,
// metrics, families, recovery): the part of the real redirect's cost that is not tracking.
func serveMiddleware(ctx context.Context, log *slog.Logger) (string, error) {
	srv := httpapi.New(httpapi.Options{Addr: "127.0.0.1:0", Log: log, Health: health.NewRegistry()})
	srv.App().Get("/c/:code", bareRedirect)
	go func() { _ = srv.Run(ctx) }()
	return srv.Addr(ctx)
}
