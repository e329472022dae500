package main

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/partnerstream/partnerstream/internal/config"
	"github.com/partnerstream/partnerstream/internal/delivery"
	"github.com/partnerstream/partnerstream/internal/httpapi"
	"github.com/partnerstream/partnerstream/internal/ingest"
	"github.com/partnerstream/partnerstream/internal/run"
)

// Each component's settings, shared by its own subcommand and by dev.
type apiSettings struct {
	common   config.Common
	postgres config.Postgres
	kafka    config.Kafka
	api      config.API
}

func newAPICmd() *cobra.Command {
	var s apiSettings
	return componentCmd("api", "Serve the HTTP API, the dashboard and click redirects",
		[]config.Group{&s.common, &s.postgres, &s.kafka, &s.api},
		func(ctx context.Context) error {
			p, err := newPlatform(&s.common, "api")
			if err != nil {
				return err
			}
			defer p.close()
			if err := p.openPostgres(ctx, &s.postgres); err != nil {
				return err
			}
			if err := p.connectKafka(ctx, &s.kafka, "partnerstream-api"); err != nil {
				return err
			}
			return p.run(ctx, &s.common, apiComponent(p, &s.api))
		})
}

func apiComponent(p *platform, cfg *config.API) run.Component {
	return httpapi.New(httpapi.Options{Addr: cfg.Addr, Log: p.componentLog("api"), Health: p.health})
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
