package main

import (
	"context"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/partnerstream/partnerstream/internal/config"
)

// demoFile is where `seed` writes the demo credentials.
type demoFile struct{ path string }

func (d *demoFile) Register(fs *pflag.FlagSet) {
	fs.StringVar(&d.path, "demo-file", ".local/demo.json", "seed: where the demo credentials are written")
}

func (d *demoFile) Validate() error {
	if d.path == "" {
		return config.Missing("demo-file")
	}
	return nil
}

// newSeedCmd seeds the demo data of an installed platform (a local cluster), as `dev` does
// at start: the database must be migrated, and --session-keys and --base-url must be the
// api's, so the printed tokens and links work against it.
func newSeedCmd() *cobra.Command {
	var (
		common   config.Common
		postgres config.Postgres
		api      config.API
		auth     authSettings
		file     demoFile
	)
	return componentCmd("seed", "Create the demo advertiser, affiliate, program and link in a migrated database, and write their credentials to a file",
		[]config.Group{&common, &postgres, &api, &file, sessionKeysChecked(&auth.session)},
		func(ctx context.Context) error {
			p, err := newPlatform(&common, "seed")
			if err != nil {
				return err
			}
			defer p.close()
			if err := p.openPostgres(ctx, &postgres); err != nil {
				return err
			}
			deps, err := newAuth(ctx, p, &auth, api.BaseURL, relayUnused)
			if err != nil {
				return err
			}
			return seedDemo(ctx, p, deps, &auth, api.BaseURL, file.path)
		})
}
