package main

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/partnerstream/partnerstream/internal/auth"
	"github.com/partnerstream/partnerstream/internal/billing"
	"github.com/partnerstream/partnerstream/internal/clickid"
	"github.com/partnerstream/partnerstream/internal/config"
	"github.com/partnerstream/partnerstream/internal/conversions"
	"github.com/partnerstream/partnerstream/internal/dashboard"
	"github.com/partnerstream/partnerstream/internal/delivery"
	"github.com/partnerstream/partnerstream/internal/fraud"
	"github.com/partnerstream/partnerstream/internal/fraudreview"
	"github.com/partnerstream/partnerstream/internal/httpapi"
	"github.com/partnerstream/partnerstream/internal/idempotency"
	"github.com/partnerstream/partnerstream/internal/kafka"
	"github.com/partnerstream/partnerstream/internal/links"
	"github.com/partnerstream/partnerstream/internal/outbox"
	"github.com/partnerstream/partnerstream/internal/postbacks"
	"github.com/partnerstream/partnerstream/internal/programs"
	"github.com/partnerstream/partnerstream/internal/ratelimit"
	"github.com/partnerstream/partnerstream/internal/rates"
	"github.com/partnerstream/partnerstream/internal/run"
	"github.com/partnerstream/partnerstream/internal/stats"
	"github.com/partnerstream/partnerstream/internal/store/pgstore"
	"github.com/partnerstream/partnerstream/internal/tracking"
	"github.com/partnerstream/partnerstream/internal/trackscript"
	"github.com/partnerstream/partnerstream/internal/webhooks"
)

// apiSettings are the api's settings; dev takes them too.
type apiSettings struct {
	common   config.Common
	postgres config.Postgres
	kafka    config.Kafka
	ch       config.ClickHouse
	api      config.API
	tracking config.Tracking
	kube     config.Kube
	egress   config.Egress
	auth     authSettings
}

func (s *apiSettings) groups() []config.Group {
	// Click ids are always signed: a conversion is attributed from its id alone, never by
	// waiting for the click to reach ClickHouse. The chart makes a key when none is given,
	// and dev keeps its own.
	clickIDKeys := keysChecked{Group: &s.tracking, flag: "click-id-keys", spec: &s.tracking.ClickIDKeys, required: true, parse: func(spec string) error {
		_, err := clickid.ParseKeys(spec)
		return err
	}}
	return append([]config.Group{&s.common, &s.postgres, &s.kafka, &s.ch, &s.api, clickIDKeys, &s.kube, &s.egress}, s.auth.groups()...)
}

func newAPICmd() *cobra.Command {
	var s apiSettings
	return componentCmd("api", "Serve the HTTP API, the dashboard and click redirects", s.groups(),
		func(ctx context.Context) error {
			p, err := newPlatform(&s.common, "api")
			if err != nil {
				return err
			}
			defer p.close()
			if err := p.openPostgres(ctx, &s.postgres); err != nil {
				return err
			}
			if err := p.openClickHouse(ctx, &s.ch); err != nil {
				return err
			}
			if err := p.connectKafka(ctx, &s.kafka, "partnerstream-api"); err != nil {
				return err
			}
			deps, err := newAuth(ctx, p, &s.auth, s.api.BaseURL, relayMissing)
			if err != nil {
				return err
			}
			c, err := newAPI(p, &s, deps)
			if err != nil {
				return err
			}
			return p.run(ctx, &s.common, c)
		})
}

// newAPI builds the api component: the HTTP server with every area mounted, plus the loops
// that run beside it (outbox relay, key cache upkeep, pruning).
func newAPI(p *platform, s *apiSettings, deps *authDeps) (run.Component, error) {
	log := p.componentLog("api")
	hooks, err := webhookService(p, &s.kube, s.api.WebhookSecretWait)
	if err != nil {
		return nil, err
	}
	keys := auth.NewKeyAuthenticator(deps.users, auth.KeyAuthOptions{Log: log})
	idem := idempotency.NewStore(p.pg, nil)
	srv := httpapi.New(httpapi.Options{
		Addr: s.api.Addr, Log: log, Health: p.health, Keys: keys, Sessions: httpapi.SessionAuth(deps.sessions),
		Idempotency:        idem,
		RateLimit:          httpapi.RateLimit{Requests: s.api.RateLimitRequests, Window: s.api.RateLimitWindow},
		PostbackLimit:      httpapi.RateLimit{Requests: s.api.PostbackLimitRequests, Window: s.api.RateLimitWindow},
		ScriptLimit:        httpapi.RateLimit{Requests: s.api.ScriptLimitRequests, Window: s.api.RateLimitWindow},
		ScriptAddressLimit: httpapi.RateLimit{Requests: s.api.ScriptAddressLimitRequests, Window: s.api.RateLimitWindow},
		FailedAuthLimit:    s.api.FailedAuthLimit, Limits: ratelimit.NewPostgres(p.pg),
		TrustedProxies: s.api.Proxies, ProxyProtocol: s.api.ProxyProtocol,
	})
	prg := programs.NewService(p.pg, programs.Options{})
	lks := links.NewService(p.pg, links.Options{BaseURL: s.api.BaseURL})
	resolver := tracking.NewResolver(lks, tracking.ResolverOptions{})
	mode, _ := tracking.ParseMode(s.tracking.Mode) // validated with the settings
	recorder, err := tracking.NewRecorder(tracking.RecorderOptions{Kafka: p.kafka, Mode: mode, AckTimeout: s.tracking.AckTimeout,
		SpoolDir: s.tracking.SpoolDir, SpoolMaxBytes: s.tracking.SpoolMaxBytes, Log: p.componentLog("tracking")})
	if err != nil {
		return nil, config.Invalid("click-spool-dir", err)
	}
	clickIDs, err := clickid.ParseKeys(s.tracking.ClickIDKeys)
	if err != nil {
		return nil, config.Invalid("click-id-keys", err)
	}
	clicks := tracking.NewService(resolver, recorder, tracking.ServiceOptions{ClickIDs: clickIDs, Log: log})
	cnv := conversions.New(p.pg, conversions.Options{ClickIDs: clickIDs, Clicks: fraud.NewClickStore(p.ch, s.ch.Database)})
	pbs := postbacks.NewService(p.pg, postbacks.Options{})
	srv.MountAuth(deps.signin, deps.sessions, deps.users, s.auth.session.InsecureCookies)
	srv.MountAPIKeys(deps.users)
	srv.MountPrograms(prg)
	srv.MountTracking(lks, clicks, httpapi.TrackingOptions{SecureCookies: strings.HasPrefix(s.api.BaseURL, "https://")})
	srv.MountPartnerships(prg)
	srv.MountProfiles(prg)
	srv.MountOnboarding(prg)
	srv.MountWebhooks(hooks)
	srv.MountPostbacks(pbs)
	allow, roots, err := egressSettings(&s.egress)
	if err != nil {
		return nil, err
	}
	// A nil *webhooks.Service must reach the routes as a nil interface: they answer 503.
	hookTargets, _ := hooks.(httpapi.DeliveryWebhooks)
	srv.MountDeliveries(delivery.NewHistory(p.pg, nil), hookTargets, httpapi.DeliveriesOptions{Client: delivery.NewHTTPClient(allow, roots), Postbacks: pbs})
	srv.MountConversions(cnv)
	rules := fraud.New(p.pg, nil)
	srv.MountFraud(rules)
	srv.MountFraudReview(httpapi.FraudReview{
		Queue:    fraudreview.Queue{Conversions: cnv, Clicks: fraudreview.ClickHouseClicks{Conn: p.ch, Database: s.ch.Database}},
		Backtest: fraudreview.Backtest{Conn: p.ch, Database: s.ch.Database}, Rules: rules})
	srv.MountPayouts(cnv)
	srv.MountRates(rates.New(p.pg, nil), httpapi.RatesOptions{Operators: s.api.OperatorCompanies})
	srv.MountConversionPostback(cnv)
	stripe := billing.New(p.pg, cnv, billing.Options{Log: log})
	srv.MountIntegrations(stripe)
	srv.MountScript(trackscript.New(p.pg, deps.users, clicks))
	st := stats.New(p.ch, s.ch.Database, stats.Options{})
	srv.MountStats(st)
	srv.MountExports(cnv, st)
	srv.MountAccount(dashboard.NewAccountStore(p.pg))
	srv.MountPeople(deps.people)
	dashboard.Mount(srv.App(), dashboard.Options{Sessions: deps.sessions, Users: deps.users, OAuthProviders: s.auth.oauth.Providers(),
		SecureCookies: strings.HasPrefix(s.api.BaseURL, "https://"), Log: p.componentLog("dashboard")})

	events := kafka.NewProducer(p.kafka, kafka.TopicEvents, kafka.ProducerOptions{})
	relay := outbox.NewRelay(p.pg, events, outbox.RelayOptions{Log: log})
	hourly := func(name string, fn func(context.Context) (int64, error)) func(context.Context) {
		return func(ctx context.Context) {
			run.Every(ctx, time.Hour, log, name, func(ctx context.Context) error { _, err := fn(ctx); return err })
		}
	}
	loops := []func(context.Context){
		func(ctx context.Context) {
			pgstore.Listen(ctx, p.pg, pgstore.Subscription{Channel: auth.RevocationChannel, Notify: keys.Forget, Reset: keys.Reset, Log: log})
		},
		func(ctx context.Context) { keys.Run(ctx, 5*time.Second) },
		srv.RunLimits,
		func(ctx context.Context) { _ = relay.Run(ctx) },
		func(ctx context.Context) { _ = recorder.Run(ctx) },
		func(ctx context.Context) {
			pgstore.Listen(ctx, p.pg, pgstore.Subscription{Channel: links.ChangedChannel, Notify: resolver.Invalidate, Reset: resolver.Reset, Log: log})
		},
		func(ctx context.Context) { _ = conversions.AutoApproval{Service: cnv, Interval: s.api.AutoApprovalInterval, Log: log}.Run(ctx) },
		conversions.ClickRules{Service: cnv, Log: log}.Run,
		func(ctx context.Context) { run.Every(ctx, time.Hour, log, "prune sign-in state", deps.prune) },
		hourly("prune idempotency keys", idem.Prune),
		hourly("prune postback secrets", pbs.PruneExpired),
		hourly("prune Stripe event ids", stripe.Prune),
		hourly("prune outbox", func(ctx context.Context) (int64, error) { return relay.Prune(ctx, 7*24*time.Hour) }),
	}
	if deps.mailer != nil {
		notices := delivery.Notices{DB: p.pg, Mailer: deps.mailer, BaseURL: s.api.BaseURL, Log: log}
		summary := fraudreview.Summary{DB: p.pg, Mailer: deps.mailer, BaseURL: s.api.BaseURL, Log: log}
		loops = append(loops, func(ctx context.Context) {
			run.Every(ctx, time.Minute, log, "tell the admins of disabled delivery targets", notices.Send)
		}, func(ctx context.Context) {
			// Every few minutes, so a summary a failed send rolled back goes out soon after.
			run.Every(ctx, 10*time.Minute, log, "e-mail the daily fraud summaries", func(ctx context.Context) error {
				_, err := summary.Send(ctx)
				return err
			})
		})
	}
	return run.Func{N: "api", F: func(ctx context.Context) error {
		// The loops outlive the server's drain: the relay keeps publishing what the last
		// requests wrote and the key cache flushes its last-use times.
		bg, stop := context.WithCancel(context.WithoutCancel(ctx))
		var wg sync.WaitGroup
		for _, loop := range loops {
			wg.Add(1)
			go func() { defer wg.Done(); loop(bg) }()
		}
		err := srv.Run(ctx)
		stop()
		wg.Wait()
		events.Close()
		return err
	}}, nil
}

// webhookService reaches the Webhook resources. Without a kubeconfig and outside a cluster
// the api still runs, and its webhook routes answer 503.
func webhookService(p *platform, k *config.Kube, wait time.Duration) (httpapi.WebhookService, error) {
	if k.Kubeconfig == "" && !inCluster() {
		p.log.Warn("no --kubeconfig and not in a cluster: webhook subscriptions are unavailable")
		return nil, nil
	}
	cfg, err := kubeConfig(k)
	if err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: newScheme()})
	if err != nil {
		return nil, config.Invalid("kubeconfig", err)
	}
	return webhooks.NewService(c, webhooks.Options{Namespace: k.Namespace, Wait: wait}), nil
}
