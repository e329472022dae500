package main

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/partnerstream/partnerstream/internal/config"
	"github.com/partnerstream/partnerstream/internal/delivery"
	"github.com/partnerstream/partnerstream/internal/egress"
	"github.com/partnerstream/partnerstream/internal/enrich"
	"github.com/partnerstream/partnerstream/internal/ingest"
	"github.com/partnerstream/partnerstream/internal/postbacks"
	"github.com/partnerstream/partnerstream/internal/run"
	"github.com/partnerstream/partnerstream/internal/webhooks"
)

func newIngestCmd() *cobra.Command {
	var (
		common config.Common
		ch     config.ClickHouse
		kafka  config.Kafka
		ing    config.Ingest
		enr    config.Enrich
	)
	return componentCmd("ingest", "Move clicks and events from Kafka into ClickHouse",
		[]config.Group{&common, &ch, &kafka, &ing, &enr},
		func(ctx context.Context) error {
			ingest.TuneGC()
			p, err := newPlatform(&common, "ingest")
			if err != nil {
				return err
			}
			defer p.close()
			// The databases first: a wrong --geoip-db is named before any connection is tried.
			e, err := openEnricher(p, &enr)
			if err != nil {
				return err
			}
			if err := p.openClickHouse(ctx, &ch); err != nil {
				return err
			}
			if err := p.connectKafka(ctx, &kafka, "partnerstream-ingest"); err != nil {
				return err
			}
			c, err := newIngest(p, &ch, &ing, e)
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
		kube     config.Kube
		del      config.Deliver
		egress   config.Egress
	)
	return componentCmd("deliver", "Send signed webhooks and postbacks, with durable retries",
		[]config.Group{&common, &postgres, &kafka, &kube, &del, &egress},
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
			comps, err := newDeliver(p, &kube, &del, &egress)
			if err != nil {
				return err
			}
			return p.run(ctx, &common, comps...)
		})
}

// newDeliver builds the delivery workers and, when there is a Kubernetes API, the informer
// cache of the Webhook subscriptions they read. Without one (dev without a control plane)
// only postbacks are delivered.
func newDeliver(p *platform, k *config.Kube, d *config.Deliver, e *config.Egress) ([]run.Component, error) {
	allow, roots, err := egressSettings(e)
	if err != nil {
		return nil, err
	}
	disableAfter := time.Duration(d.DisableAfterDays) * 24 * time.Hour
	if d.DisableAfterDays == 0 {
		disableAfter = -1 // never
	}
	o := delivery.Options{DB: p.pg, Kafka: p.kafka, Postbacks: postbacks.NewService(p.pg, postbacks.Options{}), DisableAfter: disableAfter,
		AllowList: allow, RootCAs: roots, Workers: d.Workers, PerTarget: d.PerTarget, ClaimBatch: d.ClaimBatch, Lease: d.Lease,
		Log: p.componentLog("deliver"), Health: p.health}
	var comps []run.Component
	if k.Kubeconfig != "" || inCluster() {
		cfg, err := kubeConfig(k)
		if err != nil {
			return nil, err
		}
		cache, err := webhooks.NewCache(cfg, webhooks.CacheOptions{Namespace: k.Namespace, Log: p.componentLog("webhook-cache")})
		if err != nil {
			return nil, fmt.Errorf("webhook cache: %w", err)
		}
		c, err := client.New(cfg, client.Options{Scheme: newScheme()})
		if err != nil {
			return nil, config.Invalid("kubeconfig", err)
		}
		o.Subscriptions, o.Suspender = cache, delivery.NewKubeSuspender(c, k.Namespace)
		comps = append(comps, cache)
	} else {
		p.log.Warn("no --kubeconfig and not in a cluster: only postbacks are delivered, no webhooks")
	}
	svc, err := delivery.New(o)
	if err != nil {
		return nil, err
	}
	comps = append(comps, svc)
	if d.RetentionDays > 0 {
		r := delivery.Retention{DB: p.pg, Keep: time.Duration(d.RetentionDays) * 24 * time.Hour}
		log := p.componentLog("deliver")
		comps = append(comps, run.Func{N: "delivery-retention", F: func(ctx context.Context) error {
			run.Every(ctx, time.Hour, log, "prune delivery history", func(ctx context.Context) error { _, err := r.Prune(ctx); return err })
			return nil
		}})
	}
	return comps, nil
}

// openEnricher opens the databases of click enrichment.
func openEnricher(p *platform, enr *config.Enrich) (*enrich.Enricher, error) {
	log := p.componentLog("ingest")
	geo := imageDefault(log, "geoip-db", enr.GeoIPDB, config.DefaultGeoIPDB, "clicks get no country")
	asn := imageDefault(log, "asn-db", enr.ASNDB, config.DefaultASNDB, "clicks get no network")
	e, err := enrich.New(enrich.Options{GeoIPDB: geo, ASNDB: asn, HostingASNs: enr.HostingASNs, KeepFullIP: enr.KeepFullIP})
	if err != nil {
		return nil, err
	}
	p.closers = append(p.closers, e.Close)
	log.Info("click enrichment", "reads", e.Describe())
	return e, nil
}

// imageDefault is path, or "" when path is the image's default file and a binary outside the
// image runs without it; a file the operator named must be there (enrich.New says so).
func imageDefault(log *slog.Logger, flag, path, def, without string) string {
	if path != def {
		return path
	}
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		log.Warn("the default --"+flag+" is not there (a binary outside the image): "+without, strings.ReplaceAll(flag, "-", "_"), path)
		return ""
	}
	return path
}

func newIngest(p *platform, ch *config.ClickHouse, ing *config.Ingest, e *enrich.Enricher) (run.Component, error) {
	return ingest.New(ingest.Options{Kafka: p.kafka, ClickHouse: p.ch, Database: ch.Database,
		BatchSize: ing.BatchSize, BatchInterval: ing.BatchInterval, RawRetentionMonths: ing.RawRetentionMonths, Enrich: e,
		Log: p.componentLog("ingest"), Health: p.health})
}

// egressSettings is the SSRF guard's allow-list of the settings, and the CAs receivers are
// verified with: the system's, plus the operator's extra bundle when there is one.
func egressSettings(e *config.Egress) ([]netip.Prefix, *x509.CertPool, error) {
	allow, err := egress.ParseAllowList(e.AllowCIDRs)
	if err != nil {
		return nil, nil, config.Invalid("egress-allow-cidrs", err)
	}
	if e.CAFile == "" {
		return allow, nil, nil
	}
	pem, err := os.ReadFile(e.CAFile)
	if err != nil {
		return nil, nil, config.Invalid("egress-ca-file", err)
	}
	roots, err := x509.SystemCertPool()
	if err != nil {
		roots = x509.NewCertPool()
	}
	if !roots.AppendCertsFromPEM(pem) {
		return nil, nil, config.Invalid("egress-ca-file", fmt.Errorf("%s holds no PEM certificate", e.CAFile))
	}
	return allow, roots, nil
}
