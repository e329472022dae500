package main

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/partnerstream/partnerstream/internal/config"
	"github.com/partnerstream/partnerstream/internal/demo"
	"github.com/partnerstream/partnerstream/internal/kafka/embedded"
	"github.com/partnerstream/partnerstream/internal/links"
	"github.com/partnerstream/partnerstream/internal/programs"
	"github.com/partnerstream/partnerstream/internal/run"
	"github.com/partnerstream/partnerstream/internal/session"
)

// devOnly are the settings that only `partnerstream dev` takes.
type devOnly struct {
	kafkaListen  string
	kafkaDataDir string
	demoFile     string
	seed         bool
}

func (d *devOnly) Register(fs *pflag.FlagSet) {
	fs.StringVar(&d.kafkaListen, "dev-kafka-addr", "127.0.0.1:9092", "dev: listen address of the embedded Kafka broker, used when --kafka-brokers is empty")
	fs.StringVar(&d.kafkaDataDir, "dev-kafka-data-dir", ".local/kafka", "dev: data directory of the embedded Kafka broker (survives restarts)")
	fs.StringVar(&d.demoFile, "dev-demo-file", ".local/demo.json", "dev: where the demo credentials are written")
	fs.BoolVar(&d.seed, "dev-seed", true, "dev: seed the demo advertiser and affiliate")
}

func (d *devOnly) Validate() error {
	if d.kafkaListen == "" {
		return config.Missing("dev-kafka-addr")
	}
	return nil
}

func newDevCmd() *cobra.Command {
	var (
		s = apiSettings{
			kafka:    config.Kafka{Optional: true, DevDefaults: true},
			tracking: config.Tracking{SpoolDir: ".local/spool"},
			// dev's receivers usually run on the same machine.
			egress: config.Egress{AllowCIDRs: []string{"127.0.0.0/8", "::1/128"}},
			auth:   authSettings{session: config.Session{Optional: true, DevDefaults: true}},
		}
		ctl config.Controller
		ing config.Ingest
		enr config.Enrich
		del config.Deliver
		dev devOnly
	)
	common, postgres, kafka, ch, api, kube, auth := &s.common, &s.postgres, &s.kafka, &s.ch, &s.api, &s.kube, &s.auth
	cmd := componentCmd("dev", "Run every component in one process, with an embedded Kafka broker (for a laptop or a test)",
		append(s.groups(), &ctl, &ing, &enr, &del, &dev),
		func(ctx context.Context) error {
			p, err := newPlatform(common, "dev")
			if err != nil {
				return err
			}
			defer p.close()
			enricher, err := openEnricher(p, &enr)
			if err != nil {
				return err
			}

			if len(kafka.Brokers) == 0 {
				b, err := embedded.Start(embedded.Options{Addr: dev.kafkaListen, DataDir: dev.kafkaDataDir, Logger: p.log})
				if err != nil {
					return fmt.Errorf("embedded kafka: %w", err)
				}
				p.closers = append(p.closers, b.Close)
				kafka.Brokers = b.Addrs()
				p.log.Info("embedded kafka broker started", "addr", kafka.Brokers, "data_dir", dev.kafkaDataDir)
			}
			if err := p.openPostgres(ctx, postgres); err != nil {
				return err
			}
			if err := p.migrate(ctx, postgres, ch); err != nil {
				return err
			}
			if err := p.connectKafka(ctx, kafka, "partnerstream-dev"); err != nil {
				return err
			}
			if auth.session.Keys == "" {
				if auth.session.Keys, err = devKeys(filepath.Dir(dev.demoFile), "session-keys"); err != nil {
					return err
				}
			}
			if s.tracking.ClickIDKeys == "" {
				if s.tracking.ClickIDKeys, err = devKeys(filepath.Dir(dev.demoFile), "click-id-keys"); err != nil {
					return err
				}
			}
			deps, err := newAuth(ctx, p, auth, api.BaseURL, relayLog)
			if err != nil {
				return err
			}
			if dev.seed {
				if err := seedDemo(ctx, p, deps, auth, api.BaseURL, dev.demoFile); err != nil {
					return err
				}
			}

			// Without a kubeconfig dev runs without the Kubernetes API (no Webhook resources).
			if kube.Kubeconfig != "" {
				if err := ensureNamespace(ctx, kube); err != nil {
					return err
				}
			}
			apiComp, err := newAPI(p, &s, deps)
			if err != nil {
				return err
			}
			ingComp, err := newIngest(p, ch, &ing, enricher)
			if err != nil {
				return err
			}
			delComps, err := newDeliver(p, kube, &del, &s.egress)
			if err != nil {
				return err
			}
			comps := append([]run.Component{apiComp, ingComp}, delComps...)
			if kube.Kubeconfig != "" {
				c, err := controllerComponent(ctx, p, kube, &ctl)
				if err != nil {
					return err
				}
				comps = append(comps, c)
			}
			return p.run(ctx, common, comps...)
		})
	return cmd
}

// seedDemo makes sure the demo companies, their keys, the demo program and its link exist,
// and writes them (with a dashboard token for each owner) to file.
func seedDemo(ctx context.Context, p *platform, deps *authDeps, a *authSettings, baseURL, file string) error {
	f, err := demo.Seed(ctx, deps.users, demoSessions(p, a), baseURL, file)
	if err != nil {
		return err
	}
	if err := demo.SeedProgram(ctx, programs.NewService(p.pg, programs.Options{}), links.NewService(p.pg, links.Options{BaseURL: baseURL}), &f, file); err != nil {
		return err
	}
	p.log.Info("demo data ready", "file", file, "advertiser", f.Advertiser.CompanyID, "affiliate", f.Affiliate.CompanyID, "tracking_url", f.TrackingURL)
	return nil
}

// demoSessions issues the demo users' dashboard tokens for scripts: dev only, so they live
// as long as a session does rather than the usual minutes.
func demoSessions(p *platform, a *authSettings) demo.Sessions {
	keys, _ := session.ParseKeys(a.session.Keys) // already parsed by newAuth
	return session.NewManager(p.pg, keys, session.Options{AccessTTL: a.session.RefreshTTL, RefreshTTL: a.session.RefreshTTL, InsecureCookies: true})
}

// ensureNamespace creates the namespace of the Webhook resources on a local control plane,
// where nothing else (Helm) would.
func ensureNamespace(ctx context.Context, k *config.Kube) error {
	cfg, err := kubeConfig(k)
	if err != nil {
		return err
	}
	c, err := client.New(cfg, client.Options{Scheme: newScheme()})
	if err != nil {
		return fmt.Errorf("kubernetes: %w", err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: k.Namespace}}
	if err := c.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("kubernetes: create namespace %q: %w", k.Namespace, err)
	}
	return nil
}
