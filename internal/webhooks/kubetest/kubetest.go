// Package kubetest runs a package's tests against a real kube-apiserver and etcd (envtest,
// from KUBEBUILDER_ASSETS) with the Webhook CRD of config/crd/bases installed, so the CEL
// rules under test are the generated ones.
//
//	func TestMain(m *testing.M) { os.Exit(kubetest.Run(m, &env)) }
//
// Without KUBEBUILDER_ASSETS no server is started and the tests run anyway: each calls
// env.Require(t) first, which skips it (or fails it under CI=true) through internal/testenv.
package kubetest

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/partnerstream/partnerstream/api/v1alpha1"
	"github.com/partnerstream/partnerstream/internal/testenv"
)

// Env is a running control plane.
type Env struct {
	Config *rest.Config
	Scheme *kruntime.Scheme
	// Client talks to the API server directly (no cache).
	Client client.Client
	// Kubeconfig is an admin kubeconfig file, for components run as processes.
	Kubeconfig string
}

// Run starts the control plane when KUBEBUILDER_ASSETS is set, points *env at it, runs the
// tests and stops it. It returns the exit code for os.Exit.
func Run(m *testing.M, env **Env) int {
	assets := strings.TrimSpace(os.Getenv(testenv.EnvKubeAssets))
	if assets == "" || fuzzing() {
		return m.Run()
	}
	te := &envtest.Environment{
		BinaryAssetsDirectory: assets,
		CRDDirectoryPaths:     []string{filepath.Join(RepoRoot(), "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
	}
	cfg, err := te.Start()
	if err != nil {
		fmt.Fprintf(os.Stderr, "kubetest: start envtest from %s: %v\n", assets, err)
		return 1
	}
	defer func() {
		if err := te.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "kubetest: stop envtest: %v\n", err)
		}
	}()
	scheme := Scheme()
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		fmt.Fprintf(os.Stderr, "kubetest: client: %v\n", err)
		return 1
	}
	kubeconfig, err := writeKubeconfig(te)
	if err != nil {
		fmt.Fprintf(os.Stderr, "kubetest: %v\n", err)
		return 1
	}
	defer os.Remove(kubeconfig)
	*env = &Env{Config: cfg, Scheme: scheme, Client: c, Kubeconfig: kubeconfig}
	return m.Run()
}

// writeKubeconfig writes a kubeconfig of a cluster admin of te to a temporary file.
func writeKubeconfig(te *envtest.Environment) (string, error) {
	user, err := te.AddUser(envtest.User{Name: "kubetest", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return "", fmt.Errorf("envtest user: %w", err)
	}
	data, err := user.KubeConfig()
	if err != nil {
		return "", fmt.Errorf("render kubeconfig: %w", err)
	}
	f, err := os.CreateTemp("", "kubetest-kubeconfig-*")
	if err != nil {
		return "", err
	}
	defer f.Close()
	if _, err := f.Write(data); err != nil {
		return "", fmt.Errorf("write kubeconfig: %w", err)
	}
	return f.Name(), nil
}

// Scheme has the built-in types and partnerstream.io/v1alpha1.
func Scheme() *kruntime.Scheme {
	s := kruntime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(v1alpha1.AddToScheme(s))
	return s
}

// RepoRoot is the module's root directory.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..")
}

// Require skips the test (fails it under CI=true) when no control plane runs.
func (e *Env) Require(t testing.TB) {
	t.Helper()
	testenv.KubeAssets(t)
	if e == nil {
		t.Fatal("kubetest: KUBEBUILDER_ASSETS is set but TestMain did not start the control plane (kubetest.Run)")
	}
}

// Namespace creates a namespace of its own for the test.
func (e *Env) Namespace(t testing.TB) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "test-"}}
	if err := e.Client.Create(context.Background(), ns); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	// No namespace controller runs here, so deleting it would leave it Terminating; the
	// control plane is thrown away at the end of the package anyway.
	return ns.Name
}

// StartManager runs a controller-runtime manager scoped to the namespace (as the controller
// component is) until the test ends. setup registers the reconcilers.
func (e *Env) StartManager(t testing.TB, namespace string, setup func(ctrl.Manager) error) ctrl.Manager {
	t.Helper()
	mgr, err := ctrl.NewManager(e.Config, ctrl.Options{
		Scheme:                 e.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		// Every test runs its own manager, with the same controller names.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
		Cache: cache.Options{
			DefaultNamespaces: map[string]cache.Config{namespace: {}},
			ByObject:          map[client.Object]cache.ByObject{&corev1.Secret{}: {Label: v1alpha1.SigningSecretSelector()}},
		},
	})
	if err != nil {
		t.Fatalf("create manager: %v", err)
	}
	if err := setup(mgr); err != nil {
		t.Fatalf("set up manager: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})
	syncCtx, syncCancel := context.WithTimeout(ctx, 30*time.Second)
	defer syncCancel()
	if !mgr.GetCache().WaitForCacheSync(syncCtx) {
		t.Fatal("manager cache did not sync")
	}
	return mgr
}

// fuzzing reports whether this process runs a fuzz target (`go test -fuzz`, the coordinator
// and each of its workers): fuzz targets decode bytes and need no API server, and starting
// one in every worker process kept them from ever making progress.
func fuzzing() bool {
	if !flag.Parsed() {
		flag.Parse()
	}
	for _, name := range []string{"test.fuzz", "test.fuzzworker"} {
		if f := flag.Lookup(name); f != nil && f.Value.String() != "" && f.Value.String() != "false" {
			return true
		}
	}
	return false
}
