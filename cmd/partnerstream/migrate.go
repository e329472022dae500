package main

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/partnerstream/partnerstream/internal/config"
	"github.com/partnerstream/partnerstream/internal/migrate"
)

func newMigrateCmd() *cobra.Command {
	var (
		common   config.Common
		postgres config.Postgres
		ch       config.ClickHouse
	)
	cmd := componentCmd("migrate", "Apply the Postgres and ClickHouse schema migrations (idempotent, safe from several pods)",
		[]config.Group{&common, &postgres, &ch},
		func(ctx context.Context) error {
			p, err := newPlatform(&common, "migrate")
			if err != nil {
				return err
			}
			defer p.close()
			return p.migrate(ctx, &postgres, &ch)
		})
	return cmd
}

// migrate brings both schemas up to date; it opens ClickHouse itself when needed.
func (p *platform) migrate(ctx context.Context, pg *config.Postgres, ch *config.ClickHouse) error {
	if p.ch == nil {
		if err := p.openClickHouse(ctx, ch); err != nil {
			return err
		}
	}
	return migrate.Run(ctx, pg.URL, p.ch, ch.Database, p.log)
}
