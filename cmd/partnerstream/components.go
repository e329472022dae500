package main

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/partnerstream/partnerstream/internal/config"
	"github.com/partnerstream/partnerstream/internal/delivery"
	"github.com/partnerstream/partnerstream/internal/ingest"
	"github.com/partnerstream/partnerstream/internal/run"
)

func newIngestCmd() *cobra.Command {
	var (
		common config.Common
		ch     config.ClickHouse
		kafka  config.Kafka
		ing    config.Ingest
	)
	return componentCmd("ingest", "Move clicks and events from Kafka into ClickHouse",
		[]config.Group{&common, &ch, &kafka, &ing},
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
			c, err := newIngest(p, &ch, &ing)
			if err != nil {
				return err
			}
			return p.run(ctx, &common, c)
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

func newIngest(p *platform, ch *config.ClickHouse, ing *config.Ingest) (run.Component, error) {
	return ingest.New(ingest.Options{Kafka: p.kafka, ClickHouse: p.ch, Database: ch.Database,
		BatchSize: ing.BatchSize, BatchInterval: ing.BatchInterval, Log: p.componentLog("ingest"), Health: p.health})
}
