package httpapi_test

import (
	"context"
	"log/slog"
	"net"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/partnerstream/partnerstream/internal/clickid"
	"github.com/partnerstream/partnerstream/internal/events"
	"github.com/partnerstream/partnerstream/internal/health"
	"github.com/partnerstream/partnerstream/internal/httpapi"
	"github.com/partnerstream/partnerstream/internal/links"
	"github.com/partnerstream/partnerstream/internal/tracking"
)

// oneLink is a link store holding one link.
type oneLink struct{ t links.Target }

func (o oneLink) Resolve(_ context.Context, code string) (links.Target, error) {
	if code != o.t.Code {
		return links.Target{}, links.ErrNotFound
	}
	return o.t, nil
}

// discardClicks stands for the recorder; its own cost is BenchmarkRecordAsync's in package
// tracking.
type discardClicks struct{}

func (discardClicks) Record(context.Context, events.Click) error { return nil }

// BenchmarkRedirectHandler is the click redirect's CPU and allocations per click, middleware
// included, without the network: the handler answers a request as wrk sends it (no cookie,
// so a new visitor id every time, and a sub-id) with a signed click id. -benchmem shows the
// allocations per click.
func BenchmarkRedirectHandler(b *testing.B) {
	keys, err := clickid.ParseKeys(clickid.GenerateKeySpec())
	if err != nil {
		b.Fatal(err)
	}
	const code = "AbCdEfGhJk23"
	link := links.Target{LinkID: "lnk_06f2d1x0k8m9q0000000000000", Code: code, ProgramID: "prg_06f2d1x0k8m9q0000000000000",
		PartnershipID: "ptn_06f2d1x0k8m9q0000000000000", AffiliateID: "co_06f2d1x0k8m9q0000000000001",
		AdvertiserID: "co_06f2d1x0k8m9q0000000000002", LinkStatus: links.Active, ProgramStatus: "active", PartnershipStatus: "approved",
		ClickParam: "ps_click_id", Subs: [5]string{"bench"}, ProgramLandingURL: "https://shop.example.com/landing?utm_source=affiliate"}
	svc := tracking.NewService(tracking.NewResolver(oneLink{link}, tracking.ResolverOptions{}), discardClicks{},
		tracking.ServiceOptions{ClickIDs: keys})
	srv := httpapi.New(httpapi.Options{Log: slog.New(slog.DiscardHandler), Health: health.NewRegistry()})
	srv.MountTracking(nil, svc, httpapi.TrackingOptions{})
	handler := srv.App().Handler()

	var req fasthttp.Request
	req.SetRequestURI("/c/" + code + "?sub2=wrk")
	req.Header.SetHost("127.0.0.1:8080")
	remote := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40000}
	var ctx fasthttp.RequestCtx
	serve := func() {
		ctx.Response.Reset()
		ctx.Init(&req, remote, nil)
		handler(&ctx)
		if ctx.Response.StatusCode() != fasthttp.StatusFound {
			b.Fatalf("status %d: %s", ctx.Response.StatusCode(), ctx.Response.Body())
		}
	}
	serve() // fills the link cache
	b.ReportAllocs()
	for b.Loop() {
		serve()
	}
}
