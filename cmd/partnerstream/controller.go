package main

import (
	"context"
	"fmt"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/partnerstream/partnerstream/api/v1alpha1"
	"github.com/partnerstream/partnerstream/controllers"
	"github.com/partnerstream/partnerstream/internal/config"
	"github.com/partnerstream/partnerstream/internal/run"
)

func newControllerCmd() *cobra.Command {
	var (
		common config.Common
		kube   config.Kube
		ctl    config.Controller
	)
	return componentCmd("controller", "Reconcile Webhook custom resources (signing Secrets, rotation, status)",
		[]config.Group{&common, &kube, &ctl},
		func(ctx context.Context) error {
			p, err := newPlatform(&common, "controller")
			if err != nil {
				return err
			}
			defer p.close()
			c, err := controllerComponent(ctx, p, &kube, &ctl)
			if err != nil {
				return err
			}
			return p.run(ctx, &common, c)
		})
}

// kubeConfig loads the kubeconfig file, or the in-cluster configuration when none is named.
func kubeConfig(k *config.Kube) (*rest.Config, error) {
	var (
		cfg *rest.Config
		err error
	)
	if k.Kubeconfig != "" {
		cfg, err = clientcmd.BuildConfigFromFlags("", k.Kubeconfig)
	} else {
		cfg, err = rest.InClusterConfig()
	}
	if err != nil {
		return nil, config.Invalid("kubeconfig", err)
	}
	return cfg, nil
}

func newScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(v1alpha1.AddToScheme(s))
	return s
}

// controllerComponent builds the controller-runtime manager: leader election in the
// configured namespace, a cache scoped to it, and no metrics or probe servers of its own
// (the platform's ops server serves controller-runtime's registry and our readiness). The
// cache holds the Webhooks and only the Secrets that sign them.
func controllerComponent(ctx context.Context, p *platform, k *config.Kube, c *config.Controller) (run.Component, error) {
	restCfg, err := kubeConfig(k)
	if err != nil {
		return nil, err
	}
	log.SetLogger(logr.FromSlogHandler(p.componentLog("controller").Handler()))
	mgr, err := ctrl.NewManager(restCfg, ctrl.Options{
		Scheme:                  newScheme(),
		Metrics:                 metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress:  "0",
		LeaderElection:          c.LeaderElect,
		LeaderElectionID:        "partnerstream-controller",
		LeaderElectionNamespace: k.Namespace,
		// A clean shutdown hands leadership over at once instead of after the lease expires.
		LeaderElectionReleaseOnCancel: true,
		Cache: cache.Options{
			DefaultNamespaces: map[string]cache.Config{k.Namespace: {}},
			ByObject:          map[client.Object]cache.ByObject{&corev1.Secret{}: {Label: v1alpha1.SigningSecretSelector()}},
		},
	})
	if err != nil {
		return nil, fmt.Errorf("kubernetes: create manager: %w", err)
	}
	if err := (&controllers.WebhookReconciler{Client: mgr.GetClient()}).SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("kubernetes: set up the webhook controller: %w", err)
	}
	// Reach the API server now so a wrong kubeconfig stops start-up with a clear error.
	if err := pingKube(ctx, mgr.GetAPIReader(), k.Namespace); err != nil {
		return nil, err
	}
	reader := mgr.GetAPIReader()
	p.health.Add("kubernetes", func(ctx context.Context) error { return pingKube(ctx, reader, k.Namespace) })
	return run.Func{N: "controller", F: mgr.Start}, nil
}

func pingKube(ctx context.Context, r client.Reader, namespace string) error {
	var ns corev1.Namespace
	if err := r.Get(ctx, client.ObjectKey{Name: namespace}, &ns); err != nil {
		return fmt.Errorf("kubernetes: namespace %q: %w", namespace, err)
	}
	return nil
}

// inCluster reports whether the process runs in a Kubernetes pod.
func inCluster() bool {
	_, err := rest.InClusterConfig()
	return err == nil
}
