package httpapi_test

import (
	"context"
	"log/slog"
	"net"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/partnerstream/partnerstream/internal/clickid"
	"github.com/partnerstream/partnerstream/internal/clientaddr"
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

// clickCode is the code of clickService's one link.
const clickCode = "AbCdEfGhJk23"

// clickService is the click service on one active link (clickCode) with a signed click id,
// handing its clicks to rec.
func clickService(tb testing.TB, rec tracking.ClickRecorder) *tracking.Service {
	tb.Helper()
	keys, err := clickid.ParseKeys(clickid.GenerateKeySpec())
	if err != nil {
		tb.Fatal(err)
	}
	link := links.Target{LinkID: "lnk_06f2d1x0k8m9q0000000000000", Code: clickCode, ProgramID: "prg_06f2d1x0k8m9q0000000000000",
		PartnershipID: "ptn_06f2d1x0k8m9q0000000000000", AffiliateID: "co_06f2d1x0k8m9q0000000000001",
		AdvertiserID: "co_06f2d1x0k8m9q0000000000002", LinkStatus: links.Active, ProgramStatus: "active", PartnershipStatus: "approved",
		ClickParam: "ps_click_id", Subs: [5]string{"bench"}, ProgramLandingURL: "https://shop.example.com/landing?utm_source=affiliate"}
	return tracking.NewService(tracking.NewResolver(oneLink{link}, tracking.ResolverOptions{}), rec, tracking.ServiceOptions{ClickIDs: keys})
}

// BenchmarkRedirectHandler is the click redirect's CPU and allocations per click, middleware
// included, without the network: the handler answers a request as wrk sends it (no cookie,
// so a new visitor id every time, and a sub-id) with a signed click id. -benchmem shows the
// allocations per click. The "behind a proxy" case trusts the peer and reads X-Forwarded-For.
func BenchmarkRedirectHandler(b *testing.B) {
	trusted, err := clientaddr.Parse([]string{"127.0.0.1"})
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name    string
		trusted clientaddr.Trusted
		xff     string
	}{{"direct", clientaddr.Trusted{}, ""}, {"behind a proxy", trusted, "198.51.100.7, 203.0.113.5"}} {
		b.Run(bc.name, func(b *testing.B) {
			srv := httpapi.New(httpapi.Options{Log: slog.New(slog.DiscardHandler), Health: health.NewRegistry(), TrustedProxies: bc.trusted})
			srv.MountTracking(nil, clickService(b, discardClicks{}), httpapi.TrackingOptions{})
			benchmarkRedirect(b, srv.App().Handler(), bc.xff)
		})
	}
}

func benchmarkRedirect(b *testing.B, handler fasthttp.RequestHandler, xff string) {
	var req fasthttp.Request
	req.SetRequestURI("/c/" + clickCode + "?sub2=wrk")
	req.Header.SetHost("127.0.0.1:8080")
	if xff != "" {
		req.Header.Set("X-Forwarded-For", xff)
	}
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
