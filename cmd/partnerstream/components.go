package main

import (
	"context"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/partnerstream/partnerstream/internal/auth"
	"github.com/partnerstream/partnerstream/internal/config"
	"github.com/partnerstream/partnerstream/internal/delivery"
	"github.com/partnerstream/partnerstream/internal/httpapi"
	"github.com/partnerstream/partnerstream/internal/idempotency"
	"github.com/partnerstream/partnerstream/internal/identity"
	"github.com/partnerstream/partnerstream/internal/ingest"
	"github.com/partnerstream/partnerstream/internal/run"
)

func newAPICmd() *cobra.Command {
	var (
		common   config.Common
		postgres config.Postgres
		kafka    config.Kafka
		api      config.API
		auth     authSettings
	)
	return componentCmd("api", "Serve the HTTP API, the dashboard and click redirects",
		append([]config.Group{&common, &postgres, &kafka, &api}, auth.groups()...),
		func(ctx context.Context) error {
			p, err := newPlatform(&common, "api")
			if err != nil {
				return err
			}
			defer p.close()
			if err := p.openPostgres(ctx, &postgres); err != nil {
				return err
			}
			if err := p.connectKafka(ctx, &kafka, "partnerstream-api"); err != nil {
				return err
			}
			deps, err := newAuth(ctx, p, &auth, api.BaseURL, false)
			if err != nil {
				return err
			}
			return p.run(ctx, &common, apiComponent(p, &api, deps, auth.session.InsecureCookies))
		})
}

// apiComponent is the HTTP server plus the loops that keep its API-key cache honest:
// revocations announced by other replicas, and batched last-use times.
func apiComponent(p *platform, cfg *config.API, deps *authDeps, insecureCookies bool) run.Component {
	log := p.componentLog("api")
	keys := auth.NewKeyAuthenticator(deps.users, auth.KeyAuthOptions{Log: log})
	idem := idempotency.NewStore(p.pg, nil)
	srv := httpapi.New(httpapi.Options{
		Addr: cfg.Addr, Log: log, Health: p.health, Keys: keys, Sessions: httpapi.SessionAuth(deps.sessions),
		Idempotency: idem,
		RateLimit:   httpapi.RateLimit{Requests: cfg.RateLimitRequests, Window: cfg.RateLimitWindow},
	})
	srv.MountAuth(deps.signin, deps.sessions, deps.users, insecureCookies)
	srv.MountAPIKeys(deps.users)
	return run.Func{N: "api", F: func(ctx context.Context) error {
		bg, stop := context.WithCancel(context.WithoutCancel(ctx))
		var wg sync.WaitGroup
		for _, loop := range []func(){
			func() { identity.ListenRevocations(bg, p.pg, log, keys.Forget, keys.Reset) },
			func() { keys.Run(bg, 5*time.Second) },
			func() { run.Every(bg, time.Hour, log, "prune sign-in state", deps.prune) },
			func() {
				run.Every(bg, time.Hour, log, "prune idempotency keys", func(ctx context.Context) error { _, err := idem.Prune(ctx); return err })
			},
		} {
			wg.Add(1)
			go func() { defer wg.Done(); loop() }()
		}
		err := srv.Run(ctx)
		// The server has drained: flush the last-use times it recorded, then stop the loops.
		stop()
		wg.Wait()
		return err
	}}
}

func newIngestCmd() *cobra.Command {
	var (
		common config.Common
		ch     config.ClickHouse
		kafka  config.Kafka
	)
	return componentCmd("ingest", "Move clicks and events from Kafka into ClickHouse",
		[]config.Group{&common, &ch, &kafka},
		func(ctx context.Context) error {
			p, err := newPlatform(&common, "ingest")
			if err != nil {
				return err
			}
			defer p.close()
			if err := p.openClickHouse(ctx, &ch); err != nil {
				return err
			}
			if err := p.connectKafka(ctx, &kafka, "partnerstream-ingest"); err != nil {
				return err
			}
			return p.run(ctx, &common, ingest.Service{})
		})
}

func newDeliverCmd() *cobra.Command {
	var (
		common   config.Common
		postgres config.Postgres
		kafka    config.Kafka
	)
	return componentCmd("deliver", "Send signed webhooks and postbacks, with durable retries",
		[]config.Group{&common, &postgres, &kafka},
		func(ctx context.Context) error {
			p, err := newPlatform(&common, "deliver")
			if err != nil {
				return err
			}
			defer p.close()
			if err := p.openPostgres(ctx, &postgres); err != nil {
				return err
			}
			if err := p.connectKafka(ctx, &kafka, "partnerstream-deliver"); err != nil {
				return err
			}
			return p.run(ctx, &common, delivery.Service{})
		})
}
