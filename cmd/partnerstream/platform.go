package main

import (
	"context"
	"log/slog"
	"os"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"

	"github.com/partnerstream/partnerstream/internal/config"
	"github.com/partnerstream/partnerstream/internal/health"
	"github.com/partnerstream/partnerstream/internal/kafka"
	"github.com/partnerstream/partnerstream/internal/logging"
	"github.com/partnerstream/partnerstream/internal/run"
	"github.com/partnerstream/partnerstream/internal/store/chstore"
	"github.com/partnerstream/partnerstream/internal/store/pgstore"
)

// platform holds what the components of one process share: the logger, the readiness checks
// and the store connections, closed in reverse order of opening.
type platform struct {
	base    *slog.Logger // untagged; componentLog tags it
	log     *slog.Logger // tagged with the command's name
	health  *health.Registry
	pg      *pgxpool.Pool
	ch      driver.Conn
	kafka   kafka.Config
	closers []func()
}

func newPlatform(common *config.Common, component string) (*platform, error) {
	base, err := logging.New(os.Stderr, common.LogLevel)
	if err != nil {
		return nil, config.Invalid("log-level", err)
	}
	log := base.With("component", component)
	slog.SetDefault(log)
	return &platform{base: base, log: log, health: health.NewRegistry()}, nil
}

// componentLog is the logger of one component of the process.
func (p *platform) componentLog(name string) *slog.Logger { return p.base.With("component", name) }

func (p *platform) close() {
	for i := len(p.closers) - 1; i >= 0; i-- {
		p.closers[i]()
	}
}

func (p *platform) openPostgres(ctx context.Context, cfg *config.Postgres) error {
	pool, err := pgstore.Open(ctx, cfg.URL)
	if err != nil {
		return err
	}
	p.pg = pool
	p.closers = append(p.closers, pool.Close)
	p.health.Add("postgres", pool.Ping)
	return nil
}

func (p *platform) openClickHouse(ctx context.Context, cfg *config.ClickHouse) error {
	conn, err := chstore.Open(ctx, chstore.Config{Addr: cfg.Addr, Database: cfg.Database, Username: cfg.Username, Password: cfg.Password, Cluster: cfg.Cluster})
	if err != nil {
		return err
	}
	p.ch = conn
	p.closers = append(p.closers, func() { _ = conn.Close() })
	p.health.Add("clickhouse", func(ctx context.Context) error { return chstore.Ping(ctx, conn) })
	return nil
}

// kafkaStartupTimeout bounds reaching the brokers and creating the topics at start.
const kafkaStartupTimeout = 30 * time.Second

// connectKafka checks the brokers answer and creates the topics if they are missing.
func (p *platform) connectKafka(ctx context.Context, cfg *config.Kafka, clientID string) error {
	p.kafka = cfg.Config(clientID)
	// A broker address that accepts connections but never answers must not hang start-up.
	ctx, cancel := context.WithTimeout(ctx, kafkaStartupTimeout)
	defer cancel()
	if err := kafka.Ping(ctx, p.kafka); err != nil {
		return err
	}
	if err := kafka.EnsureTopics(ctx, p.kafka, kafka.TopicClicks, kafka.TopicEvents); err != nil {
		return err
	}
	kcfg := p.kafka
	p.health.Add("kafka", func(ctx context.Context) error { return kafka.Ping(ctx, kcfg) })
	return nil
}

func (p *platform) run(ctx context.Context, common *config.Common, comps ...run.Component) error {
	return run.Main(ctx, run.Options{Log: p.log, MetricsAddr: common.MetricsAddr, ShutdownTimeout: common.ShutdownTimeout, Health: p.health}, comps...)
}

// componentCmd builds a subcommand whose settings are the given groups; start runs after the
// settings are read and valid.
func componentCmd(use, short string, groups []config.Group, start func(ctx context.Context) error) *cobra.Command {
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := config.Apply(cmd.Flags(), groups...); err != nil {
				return err
			}
			return start(cmd.Context())
		},
	}
	for _, g := range groups {
		g.Register(cmd.Flags())
	}
	return cmd
}
