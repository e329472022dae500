package dashboard_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/partnerstream/partnerstream/controllers"
	"github.com/partnerstream/partnerstream/internal/auth"
	"github.com/partnerstream/partnerstream/internal/billing"
	"github.com/partnerstream/partnerstream/internal/clickid"
	"github.com/partnerstream/partnerstream/internal/clientaddr"
	"github.com/partnerstream/partnerstream/internal/conversions"
	"github.com/partnerstream/partnerstream/internal/dashboard"
	"github.com/partnerstream/partnerstream/internal/delivery"
	"github.com/partnerstream/partnerstream/internal/enrich"
	"github.com/partnerstream/partnerstream/internal/enrich/enrichtest"
	"github.com/partnerstream/partnerstream/internal/fraud"
	"github.com/partnerstream/partnerstream/internal/fraudreview"
	"github.com/partnerstream/partnerstream/internal/health"
	"github.com/partnerstream/partnerstream/internal/httpapi"
	"github.com/partnerstream/partnerstream/internal/idempotency"
	"github.com/partnerstream/partnerstream/internal/identity"
	"github.com/partnerstream/partnerstream/internal/ids"
	"github.com/partnerstream/partnerstream/internal/ingest"
	"github.com/partnerstream/partnerstream/internal/kafka"
	"github.com/partnerstream/partnerstream/internal/links"
	"github.com/partnerstream/partnerstream/internal/magiccode"
	"github.com/partnerstream/partnerstream/internal/mailer"
	"github.com/partnerstream/partnerstream/internal/oidclogin"
	"github.com/partnerstream/partnerstream/internal/outbox"
	"github.com/partnerstream/partnerstream/internal/people"
	"github.com/partnerstream/partnerstream/internal/postbacks"
	"github.com/partnerstream/partnerstream/internal/programs"
	"github.com/partnerstream/partnerstream/internal/rates"
	"github.com/partnerstream/partnerstream/internal/session"
	"github.com/partnerstream/partnerstream/internal/signin"
	"github.com/partnerstream/partnerstream/internal/stats"
	"github.com/partnerstream/partnerstream/internal/testenv"
	"github.com/partnerstream/partnerstream/internal/testenv/chtest"
	"github.com/partnerstream/partnerstream/internal/testenv/pgtest"
	"github.com/partnerstream/partnerstream/internal/tracking"
	"github.com/partnerstream/partnerstream/internal/trackscript"
	"github.com/partnerstream/partnerstream/internal/webhooks"
	"github.com/partnerstream/partnerstream/internal/webhooks/kubetest"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// stack is the api component as cmd/partnerstream builds it, on a free loopback port, with
// the dashboard mounted: real Postgres and ClickHouse, an embedded Kafka broker carrying
// clicks and domain events to ClickHouse through the real outbox relay and ingest, and an
// SMTP listener receiving the sign-in codes, and the delivery workers. Webhooks need the
// envtest control plane (stackOptions.kube).
type stack struct {
	base  string
	db    *pgxpool.Pool
	inbox *testenv.Inbox
	ids   *identity.Store
	prg   *programs.Service
	lks   *links.Service
	// script keeps the programs' tracking script settings.
	script *trackscript.Service
	rules  *fraud.Service

	google, linkedin *testenv.Provider
}

// kube is the envtest control plane of the package's tests (nil without KUBEBUILDER_ASSETS:
// the webhook journey then skips, or fails under CI=true).
var kube *kubetest.Env

func TestMain(m *testing.M) {
	code := kubetest.Run(m, &kube)
	stopChromiums()
	os.Exit(code)
}

// stackOptions choose the optional parts of the stack.
type stackOptions struct {
	// kube runs webhooks on the envtest control plane with the real controller, and the
	// delivery workers deliver them.
	kube bool
	// oidc adds Google and LinkedIn sign-in, each a local OpenID Connect provider
	// (stack.google, stack.linkedin).
	oidc bool
	// places believes X-Forwarded-For from loopback, so that a test's clicks come from the
	// addresses it names, and ingest finds their countries in a database of these networks.
	places []enrichtest.Network
	// api changes the api server's options.
	api func(*httpapi.Options)
}

func newStack(t *testing.T, o stackOptions) *stack {
	t.Helper()
	var hooks *webhooks.Service
	var subs *webhooks.Cache
	if o.kube {
		kube.Require(t)
		ns := kube.Namespace(t)
		kube.StartManager(t, ns, func(mgr ctrl.Manager) error {
			return (&controllers.WebhookReconciler{Client: mgr.GetClient()}).SetupWithManager(mgr)
		})
		hooks = webhooks.NewService(kube.Client, webhooks.Options{Namespace: ns})
		var err error
		if subs, err = webhooks.NewCache(kube.Config, webhooks.CacheOptions{Namespace: ns, Log: quiet}); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	_, db := pgtest.Migrated(t)
	_, chDB, ch := chtest.Migrated(t)
	kcfg := kafka.Config{Brokers: testenv.Kafka(t), Partitions: 1, ReplicationFactor: 1, Retention: time.Hour, ClientID: "dashboard-test"}
	if err := kafka.EnsureTopics(ctx, kcfg, kafka.TopicClicks, kafka.TopicEvents); err != nil {
		t.Fatal(err)
	}

	s := &stack{db: db, ids: identity.NewStore(db)}
	keys, err := session.ParseKeys(session.GenerateKeySpec())
	if err != nil {
		t.Fatal(err)
	}
	sessions := session.NewManager(db, keys, session.Options{InsecureCookies: true})
	var m mailer.Mailer
	m, s.inbox = testenv.SMTPMailer(t)
	codes, err := magiccode.NewService(db, m, magiccode.Options{Pepper: keys.Derive("magic-code-pepper")})
	if err != nil {
		t.Fatal(err)
	}

	addr := "127.0.0.1:0"
	var oauth signin.OAuth
	if o.oidc {
		// The providers send the browser back to the api, so its address is chosen first.
		addr = testenv.FreeAddr(t)
		s.google = testenv.OIDCProvider(t)
		s.linkedin = testenv.OIDCProvider(t, testenv.OIDCTokenAuthMethods(testenv.ClientSecretPost))
		var providers []oidclogin.ProviderConfig
		for name, p := range map[string]*testenv.Provider{"google": s.google, "linkedin": s.linkedin} {
			providers = append(providers, oidclogin.ProviderConfig{Name: name, Issuer: p.Issuer(), ClientID: p.ClientID(),
				ClientSecret: p.ClientSecret(), RedirectURL: "http://" + addr + "/api/auth/oauth/" + name + "/callback"})
		}
		svc, err := oidclogin.New(ctx, db, providers, oidclogin.Options{})
		if err != nil {
			t.Fatal(err)
		}
		oauth = svc
	}

	keyAuth := auth.NewKeyAuthenticator(s.ids, auth.KeyAuthOptions{Log: quiet})
	var proxies clientaddr.Trusted
	var enricher *enrich.Enricher
	if o.places != nil {
		if proxies, err = clientaddr.Parse([]string{"127.0.0.1"}); err != nil {
			t.Fatal(err)
		}
		if enricher, err = enrich.New(enrich.Options{GeoIPDB: enrichtest.GeoLite2City(t, o.places...)}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(enricher.Close)
	}
	apiOpts := httpapi.Options{Addr: addr, Log: quiet, Health: health.NewRegistry(), Keys: keyAuth,
		Sessions: httpapi.SessionAuth(sessions), Idempotency: idempotency.NewStore(db, nil), TrustedProxies: proxies}
	if o.api != nil {
		o.api(&apiOpts)
	}
	srv := httpapi.New(apiOpts)
	s.prg = programs.NewService(db, programs.Options{})
	srvBase := "http://127.0.0.1" // links carry it; the redirect is called by path
	s.lks = links.NewService(db, links.Options{BaseURL: srvBase})
	recorder, err := tracking.NewRecorder(tracking.RecorderOptions{Kafka: kcfg, Mode: tracking.ModeAck, AckTimeout: 2 * time.Second,
		SpoolDir: t.TempDir(), SpoolMaxBytes: 1 << 20, Log: quiet})
	if err != nil {
		t.Fatal(err)
	}
	clickIDs, err := clickid.ParseKeys(clickid.GenerateKeySpec())
	if err != nil {
		t.Fatal(err)
	}
	clicks := tracking.NewService(tracking.NewResolver(s.lks, tracking.ResolverOptions{}), recorder, tracking.ServiceOptions{ClickIDs: clickIDs, Log: quiet})
	cnv := conversions.New(db, conversions.Options{ClickIDs: clickIDs})
	team := people.NewService(db, m, people.Options{})
	srv.MountAuth(signin.New(s.ids, sessions, codes, oauth).WithInvitations(team), sessions, s.ids, true)
	srv.MountAPIKeys(s.ids)
	srv.MountAccount(dashboard.NewAccountStore(db))
	srv.MountPeople(team)
	srv.MountPrograms(s.prg)
	srv.MountTracking(s.lks, clicks, httpapi.TrackingOptions{})
	s.script = trackscript.New(db, s.ids, clicks)
	srv.MountScript(s.script)
	srv.MountPartnerships(s.prg)
	srv.MountProfiles(s.prg)
	srv.MountOnboarding(s.prg)
	pbs := postbacks.NewService(db, postbacks.Options{})
	// "Send test" reaches the tests' receivers on loopback through the delivery workers'
	// guarded client.
	sendTests := httpapi.DeliveriesOptions{Client: delivery.NewHTTPClient([]netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}, nil), Postbacks: pbs}
	// The delivery routes' literal paths go before the webhook routes' /api/webhooks/:id.
	if hooks != nil {
		srv.MountDeliveries(delivery.NewHistory(db, nil), hooks, sendTests)
		srv.MountWebhooks(hooks)
	} else {
		srv.MountDeliveries(delivery.NewHistory(db, nil), nil, sendTests)
		srv.MountWebhooks(nil)
	}
	srv.MountPostbacks(pbs)
	srv.MountConversions(cnv)
	srv.MountPayouts(cnv)
	srv.MountConversionPostback(cnv)
	srv.MountIntegrations(billing.New(db, cnv, billing.Options{Log: quiet}))
	st := stats.New(ch, chDB, stats.Options{})
	srv.MountStats(st)
	srv.MountExports(cnv, st)
	srv.MountRates(rates.New(db, nil), httpapi.RatesOptions{})
	s.rules = fraud.New(db, nil)
	srv.MountFraud(s.rules)
	srv.MountFraudReview(httpapi.FraudReview{Queue: fraudreview.Queue{Conversions: cnv, Clicks: fraudreview.ClickHouseClicks{Conn: ch, Database: chDB}},
		Backtest: fraudreview.Backtest{Conn: ch, Database: chDB}, Rules: s.rules})
	dashboard.Mount(srv.App(), dashboard.Options{Sessions: sessions, Users: s.ids, OAuthProviders: []string{"google", "linkedin"}, Log: quiet})

	events := kafka.NewProducer(kcfg, kafka.TopicEvents, kafka.ProducerOptions{})
	relay := outbox.NewRelay(db, events, outbox.RelayOptions{PollInterval: 20 * time.Millisecond})
	ing, err := ingest.New(ingest.Options{Kafka: kcfg, ClickHouse: ch, Database: chDB, BatchInterval: 50 * time.Millisecond, Enrich: enricher, Log: quiet})
	if err != nil {
		t.Fatal(err)
	}
	// The receivers of the tests listen on loopback, which the SSRF guard refuses unless
	// allowed.
	do := delivery.Options{DB: db, Kafka: kcfg, Postbacks: pbs, AllowList: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")},
		PollInterval: 100 * time.Millisecond, Log: quiet}
	runs := []func(context.Context) error{srv.Run, relay.Run, recorder.Run, ing.Run}
	if subs != nil {
		do.Subscriptions = subs
		runs = append(runs, subs.Run)
	}
	deliver, err := delivery.New(do)
	if err != nil {
		t.Fatal(err)
	}
	runs = append(runs, deliver.Run)
	done := make(chan struct{}, len(runs))
	for _, run := range runs {
		go func() { _ = run(ctx); done <- struct{}{} }()
	}
	t.Cleanup(func() {
		cancel()
		for range runs {
			<-done
		}
		events.Close()
	})
	bound, err := srv.Addr(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s.base = "http://" + bound
	return s
}

// call sends a request with an API key and returns the status and body.
func (s *stack) call(t *testing.T, method, path, key, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, s.base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("x-api-key", key)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func (s *stack) eventually(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, func() (bool, string) {
		ok, last := cond()
		return ok, what + ": " + last
	})
}

// trafficFor gives the advertiser (signed up in the browser) a public program, an affiliate
// company with a tracking link to it, and one click through the real redirect; it returns the
// click id the landing page receives.
func (s *stack) trafficFor(t *testing.T, advertiserEmail, affiliateEmail string) string {
	t.Helper()
	u, err := s.ids.UserByEmail(context.Background(), advertiserEmail)
	if err != nil {
		t.Fatal(err)
	}
	_, code := s.partnerLink(t, u.CompanyID, affiliateEmail)
	return s.click(t, code)
}

// partnerLink gives the advertiser a public program "Shoes" and a new affiliate company an
// approved partnership with a tracking link to it; it returns the program's id and the link's
// code.
func (s *stack) partnerLink(t *testing.T, advertiserID, affiliateEmail string) (programID, code string) {
	t.Helper()
	ctx := context.Background()
	prog, err := s.prg.CreateProgram(ctx, programs.Actor{CompanyID: advertiserID, Kind: identity.Advertiser, Role: "owner"},
		programs.ProgramInput{Name: "Shoes", LandingURL: "https://shop.example/", Currency: "EUR",
			Commission: &programs.RuleInput{Type: "fixed", Amount: "12.50"}, Visibility: "public"})
	if err != nil {
		t.Fatal(err)
	}
	aff, _, err := s.ids.CreateCompany(ctx, identity.NewCompany{Kind: identity.Affiliate, Name: "Affiliate", OwnerEmail: affiliateEmail})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.prg.Apply(ctx, programs.Actor{CompanyID: aff.ID, Kind: identity.Affiliate, Role: "owner"}, programs.ApplyInput{ProgramID: prog.ID}); err != nil {
		t.Fatal(err)
	}
	link, err := s.lks.Create(ctx, aff.ID, identity.Affiliate, links.NewLink{ProgramID: prog.ID})
	if err != nil {
		t.Fatal(err)
	}
	return prog.ID, link.Code
}

// click follows a tracking link like a browser and returns the click id the landing page
// receives.
func (s *stack) click(t *testing.T, code string) string {
	t.Helper()
	return s.visit(t, code, visitor{userAgent: "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 Chrome/120 Safari/537.36"})
}

// visitor is who follows a link: its address (with stackOptions.places; else loopback's),
// user agent and referring page.
type visitor struct {
	ip, userAgent, referrer string
}

// visit follows a tracking link as v and returns the click id the landing page receives.
func (s *stack) visit(t *testing.T, code string, v visitor) string {
	t.Helper()
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	req, _ := http.NewRequest("GET", s.base+"/c/"+code, nil)
	req.Header.Set("User-Agent", v.userAgent)
	if v.ip != "" {
		req.Header.Set("X-Forwarded-For", v.ip)
	}
	if v.referrer != "" {
		req.Header.Set("Referer", v.referrer)
	}
	resp, err := noFollow.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	loc, err := url.Parse(resp.Header.Get("Location"))
	if err != nil || loc.Query().Get("ps_click_id") == "" {
		t.Fatalf("click redirect: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	return loc.Query().Get("ps_click_id")
}

// failedDelivery records a delivery to the webhook that has used up its retries (one attempt
// answered 500), as the delivery workers leave one, so that a test need not wait out the
// retry schedule. It returns the delivery id.
func (s *stack) failedDelivery(t *testing.T, companyID, webhookID, url string) string {
	t.Helper()
	ctx := context.Background()
	id, now := ids.New(ids.Delivery), time.Now()
	if _, err := s.db.Exec(ctx, `INSERT INTO deliveries (id, company_id, kind, target_id, url, event_id, event_type, body, status,
		attempts, last_status, created_at, updated_at) VALUES ($1, $2, 'webhook', $3, $4, $5, 'conversion.created', '{}', 'failed', 1, 500, $6, $6)`,
		id, companyID, webhookID, url, ids.New(ids.Event), now); err != nil {
		t.Fatal(err)
	}
	if _, err := s.db.Exec(ctx, `INSERT INTO delivery_attempts (delivery_id, n, trigger, started_at, duration_ms, status_code, response_excerpt)
		VALUES ($1, 1, 'scheduled', $2, 12, 500, 'down for maintenance')`, id, now); err != nil {
		t.Fatal(err)
	}
	return id
}
