// Package httpapi is the api component's HTTP server: the three API families, the dashboard,
// click redirects and the public endpoints, on Fiber. Handlers stay thin and call domain
// services; this package owns the cross-cutting rules (request ids, errors, metrics, limits).
package httpapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"runtime/debug"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/partnerstream/partnerstream/internal/auth"
	"github.com/partnerstream/partnerstream/internal/clientaddr"
	"github.com/partnerstream/partnerstream/internal/health"
	"github.com/partnerstream/partnerstream/internal/ids"
	"github.com/partnerstream/partnerstream/internal/metrics"
	"github.com/partnerstream/partnerstream/internal/ratelimit"
)

// BodyLimit caps request bodies; larger ones get a 413 problem.
const BodyLimit = 1 << 20

// HeaderLimit caps the request line and headers together (Fiber's default is 4 KiB). Browsers
// send every cookie of the tracking domain with a click, and a visitor refused with 431 is a
// lost click: this takes 16 KiB of headers, as common proxies do, beside a long request line.
const HeaderLimit = 24 << 10

// Options of the HTTP server.
type Options struct {
	Addr   string
	Log    *slog.Logger
	Health *health.Registry
	// Keys authenticates API keys (/api/v1, /api/partner-api); Sessions authenticates the
	// dashboard (/api). Without them those families refuse every request.
	Keys     KeyAuthenticator
	Sessions SessionAuthenticator
	// Idempotency stores Idempotency-Key responses; nil disables replay.
	Idempotency IdempotencyStore
	// RateLimit per credential; zero Requests disables it.
	RateLimit RateLimit
	// PostbackLimit is the budget of each postback token (GET and POST /postback); zero
	// Requests disables it.
	PostbackLimit RateLimit
	// ScriptLimit is the budget of tracking script clicks of each publishable key, and
	// ScriptAddressLimit that of each client address per key (POST /api/script/clicks);
	// zero Requests disables either.
	ScriptLimit, ScriptAddressLimit RateLimit
	// FailedAuthLimit is how many wrong credentials (API keys, session tokens, postback
	// tokens, publishable keys) an address may send per minute before its further wrong
	// ones get 429 for the rest of the minute; valid credentials are always served. 0
	// disables.
	FailedAuthLimit int
	// Limits is where the api replicas share their rate-limit counts
	// (ratelimit.NewPostgres); nil counts in this process only, a budget per replica.
	Limits ratelimit.Store
	// TrustedProxies are the proxies whose X-Forwarded-For names the client; with
	// ProxyProtocol, they may also open their connections with a PROXY protocol header.
	TrustedProxies clientaddr.Trusted
	ProxyProtocol  bool
	Now            func() time.Time
}

// Server is the api component.
type Server struct {
	app      *fiber.App
	addr     string
	log      *slog.Logger
	keys     KeyAuthenticator
	sessions SessionAuthenticator
	idem     IdempotencyStore
	// limiter is the per-credential budget, postbackLimiter the per-token one, and the
	// script's the per-publishable-key and per-address ones (nil: off); failedAuth throttles
	// addresses that send wrong credentials. All count in limitStore.
	limiter              *limiter
	postbackLimiter      *limiter
	scriptLimiter        *limiter
	scriptAddressLimiter *limiter
	failedAuth           *failedAuth
	limitStore           ratelimit.Store
	// clients decides a request's client address (clientIP); proxyProtocol wraps the
	// listener for the PROXY protocol.
	clients       clientaddr.Trusted
	proxyProtocol bool
	// routes indexes the route templates for knownRoute.
	routes    atomic.Pointer[routeIndex]
	publicAPI [][]string // /api route templates that need no credentials (sign-in), by segment
	// secretRoutes are the route templates whose paths carry a credential: logs name the
	// template instead (loggedPath).
	secretRoutes []string
	// bound receives the listening address once the server accepts connections.
	bound chan string
}

// New builds the server and its routes.
func New(o Options) *Server {
	var s *Server
	app := fiber.New(fiber.Config{
		AppName:               "partnerstream",
		BodyLimit:             BodyLimit,
		ReadBufferSize:        HeaderLimit,
		ReadTimeout:           15 * time.Second,
		WriteTimeout:          30 * time.Second,
		IdleTimeout:           120 * time.Second,
		DisableStartupMessage: true,
		ErrorHandler:          errorHandler(o.Log, func(c *fiber.Ctx) string { return s.loggedPath(c) }),
		// The families' credential rules select routes by their exact prefix: a router that
		// ignored case would serve /API/api-keys without any credentials.
		CaseSensitive: true,
		// Fiber trusts no proxy's X-Forwarded-* headers (Hostname, Protocol): the client
		// address is clientIP's, and nothing else is taken from a proxy.
		EnableTrustedProxyCheck: true,
	})
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Keys == nil {
		o.Keys = noKeys{}
	}
	if o.Limits == nil {
		o.Limits = ratelimit.NewMemory()
	}
	s = &Server{app: app, addr: o.Addr, log: o.Log, keys: o.Keys, sessions: o.Sessions, idem: o.Idempotency,
		limiter:         newLimiter(o.Limits, scopeCredential, "this credential", o.RateLimit, o.Now),
		postbackLimiter: newLimiter(o.Limits, scopePostback, "this postback token", o.PostbackLimit, o.Now),
		scriptLimiter:   newLimiter(o.Limits, scopeScriptKey, "this publishable key", o.ScriptLimit, o.Now),
		scriptAddressLimiter: newLimiter(o.Limits, scopeScriptAddress, "this client address with this publishable key",
			o.ScriptAddressLimit, o.Now),
		failedAuth: newFailedAuth(o.Limits, o.FailedAuthLimit, o.Now), limitStore: o.Limits,
		clients: o.TrustedProxies, proxyProtocol: o.ProxyProtocol, bound: make(chan string, 1)}
	app.Use(s.recover, requestID, observe, s.families)
	app.Get("/healthz", func(c *fiber.Ctx) error {
		return c.JSON(fiber.Map{"status": "ok"})
	})
	s.mountOpenAPI()
	app.Get("/readyz", func(c *fiber.Ctx) error {
		rep := o.Health.Ready(c.UserContext())
		if !rep.Ready {
			c.Status(fiber.StatusServiceUnavailable)
		}
		c.Set(fiber.HeaderCacheControl, "no-store")
		return c.JSON(rep)
	})
	return s
}

// App exposes the Fiber app so other packages can mount their routes.
func (s *Server) App() *fiber.App { return s.app }

// Public registers a route under /api that needs no credentials (sign-in).
func (s *Server) Public(method, path string, h ...fiber.Handler) {
	s.publicAPI = append(s.publicAPI, strings.Split(path, "/"))
	s.app.Add(method, path, h...)
}

// isPublic reports whether a request path matches a public route template (":param"
// segments match any one segment).
func (s *Server) isPublic(path string) bool {
	segs := strings.Split(path, "/")
	for _, tmpl := range s.publicAPI {
		if matchSegments(tmpl, segs) {
			return true
		}
	}
	return false
}

// loggedPath is the request's path for a log line: the route template when the path carries
// a credential.
func (s *Server) loggedPath(c *fiber.Ctx) string {
	if r := c.Route(); r != nil && slices.Contains(s.secretRoutes, r.Path) {
		return r.Path
	}
	return c.Path()
}

// noKeys refuses every API key (a server built without a key store).
type noKeys struct{}

func (noKeys) Authenticate(context.Context, string) (auth.KeyRecord, error) {
	return auth.KeyRecord{}, auth.ErrUnknownKey
}

// Name implements run.Component.
func (s *Server) Name() string { return "api" }

// Addr waits for the listening address (useful with port 0 in tests).
func (s *Server) Addr(ctx context.Context) (string, error) {
	select {
	case a := <-s.bound:
		s.bound <- a
		return a, nil
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// Run serves until ctx ends, then stops accepting connections and waits for in-flight
// requests (bounded by the caller's shutdown timeout).
func (s *Server) Run(ctx context.Context) error {
	ln, err := net.Listen("tcp", s.addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", s.addr, err)
	}
	s.bound <- ln.Addr().String()
	if s.proxyProtocol {
		ln = s.clients.ProxyProtocol(ln)
	}
	errc := make(chan error, 1)
	go func() { errc <- s.app.Listener(ln) }()
	s.log.Info("http api listening", "addr", ln.Addr().String(), "trusted_proxies", s.clients.String(), "proxy_protocol", s.proxyProtocol)
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	// Shutdown waits for in-flight requests; the run package bounds the whole drain.
	if err := s.app.Shutdown(); err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("shutdown: %w", err)
	}
	return nil
}

// clientIP is the address of the request's client as text, decided by clientaddr from the
// connection's peer and, when the peer is a trusted proxy, X-Forwarded-For. Everything that
// uses a client address takes it from here. The click redirect calls it on every click, so it
// costs one allocation (the string) and looks at no header unless the peer is trusted.
func clientIP(c *fiber.Ctx, trusted clientaddr.Trusted) string {
	// fasthttp reports 0.0.0.0 for a connection that is not TCP.
	peer, _ := netip.AddrFromSlice(c.Context().RemoteIP())
	addr := peer.Unmap()
	if trusted.Contains(addr) {
		addr = trusted.Client(addr, c.Request().Header.PeekAll(fiber.HeaderXForwardedFor))
	}
	var buf [len("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff")]byte
	return string(addr.AppendTo(buf[:0]))
}

// subscriber is the range a budget per client address counts for an address clientIP gave
// (clientaddr.Subscriber: an IPv6 client's /64).
func subscriber(ip string) string {
	a, err := netip.ParseAddr(ip)
	if err != nil {
		return ip
	}
	return clientaddr.Subscriber(a).String()
}

const requestIDHeader = "X-Request-Id"

// requestID takes a sane incoming X-Request-Id or makes one, and echoes it. Click redirects
// only echo one: they are the hot path, and RequestID makes one if a redirect fails.
func requestID(c *fiber.Ctx) error {
	id := c.Get(requestIDHeader)
	if validRequestID(id) {
		setRequestID(c, strings.Clone(id))
	} else if !strings.HasPrefix(c.Path(), "/c/") {
		setRequestID(c, ids.New("req"))
	}
	return c.Next()
}

func setRequestID(c *fiber.Ctx, id string) {
	c.Locals(requestIDHeader, id)
	c.Set(requestIDHeader, id)
}

func validRequestID(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		b := s[i]
		if !(b == '-' || b == '_' || (b >= '0' && b <= '9') || (b >= 'a' && b <= 'z') || (b >= 'A' && b <= 'Z')) {
			return false
		}
	}
	return true
}

// RequestID returns the request's id.
func RequestID(c *fiber.Ctx) string {
	id, _ := c.Locals(requestIDHeader).(string)
	if id == "" {
		id = ids.New("req")
		setRequestID(c, id)
	}
	return id
}

// recover turns a panic into a logged 500 problem: a bug in one handler must not take the
// process down.
func (s *Server) recover(c *fiber.Ctx) (err error) {
	defer func() {
		if r := recover(); r != nil {
			s.log.Error("panic in handler", "request_id", RequestID(c), "path", s.loggedPath(c), "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
			err = errors.New("panic")
		}
	}()
	return c.Next()
}

var (
	httpRequests = metrics.NewCounterVec("http_requests_total", "HTTP requests answered, by method, route template and status class.", "method", "route", "status")
	httpDuration = metrics.NewHistogramVec("http_request_duration_seconds", "HTTP request latency by method and route template.", []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5}, "method", "route")
)

// observe records request metrics under the route template (never the raw path, whose ids
// would make the label set unbounded).
func observe(c *fiber.Ctx) error {
	// fasthttp read the clock when the request was read, just before the middleware ran.
	start := c.Context().Time()
	err := c.Next()
	status := c.Response().StatusCode()
	if err != nil {
		var p *Problem
		var fe *fiber.Error
		switch {
		case errors.As(err, &p):
			status = p.Status
		case errors.As(err, &fe):
			status = fe.Code
		default:
			status = fiber.StatusInternalServerError
		}
	}
	// Unmatched paths report the catch-all middleware's template "/", so the label set stays
	// the set of declared routes.
	route := c.Route().Path
	method := methodLabel(c.Method())
	class := statusClass(status)
	if route == redirectRoute && method == fiber.MethodGet {
		redirectSeries.requests[class].Inc()
		redirectSeries.duration.Observe(time.Since(start).Seconds())
		return err
	}
	httpRequests.WithLabelValues(method, route, statusClasses[class]).Inc()
	httpDuration.WithLabelValues(method, route).Observe(time.Since(start).Seconds())
	return err
}

// statusClasses are the status label's values; an out-of-range status counts as 5xx.
var statusClasses = [...]string{"1xx", "2xx", "3xx", "4xx", "5xx"}

func statusClass(status int) int {
	if status < 100 || status >= 600 {
		return 4
	}
	return status/100 - 1
}

// redirectSeries are the click redirect's series, bound once: it is the hot path, and
// finding a labelled series costs it more than counting.
var redirectSeries = func() (s struct {
	requests [len(statusClasses)]prometheus.Counter
	duration prometheus.Observer
}) {
	for i, class := range statusClasses {
		s.requests[i] = httpRequests.WithLabelValues(fiber.MethodGet, redirectRoute, class)
	}
	s.duration = httpDuration.WithLabelValues(fiber.MethodGet, redirectRoute)
	return s
}()

// methodLabel maps a request method to a constant label value. Fiber's Method points into a
// buffer reused by later requests, so a label must never keep it; and a client can send any
// token as a method, so unknown ones share one label.
func methodLabel(m string) string {
	for _, known := range []string{fiber.MethodGet, fiber.MethodHead, fiber.MethodPost, fiber.MethodPut, fiber.MethodPatch,
		fiber.MethodDelete, fiber.MethodOptions} {
		if m == known {
			return known
		}
	}
	return "OTHER"
}
