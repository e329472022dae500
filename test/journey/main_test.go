package journey

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/partnerstream/partnerstream/internal/testenv"
)

// The binaries and the control plane are shared by every test of the package: each takes
// tens of seconds to make, and the tests isolate themselves by database and namespace.
var (
	buildOnce sync.Once
	binDir    string
	buildErr  error

	kubeOnce sync.Once
	kubeEnv  *envtest.Environment
	kube     *kubeAccess
	kubeErr  error
)

type kubeAccess struct {
	kubeconfig string // an admin kubeconfig file for the processes
	client     client.Client
}

func TestMain(m *testing.M) {
	code := m.Run()
	if kubeEnv != nil {
		if err := kubeEnv.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "journey: stop envtest: %v\n", err)
		}
	}
	if binDir != "" {
		_ = os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// repoRoot is the module root, two levels above this file.
func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// binaries builds partnerstream and the standalone broker once per test binary (without the
// race detector: the processes are what is under test, not the builds) and returns their
// directory. JOURNEY_PARTNERSTREAM_BIN names a partnerstream binary to use instead of
// building one (a release build, or the last good one while the tree does not build).
func binaries(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "journey-bin-")
		if buildErr != nil {
			return
		}
		pkgs := map[string]string{"./cmd/partnerstream": "partnerstream", "./hack/kafka": "kafka"}
		if prebuilt := os.Getenv("JOURNEY_PARTNERSTREAM_BIN"); prebuilt != "" {
			delete(pkgs, "./cmd/partnerstream")
			if buildErr = os.Symlink(prebuilt, filepath.Join(binDir, "partnerstream")); buildErr != nil {
				return
			}
		}
		for pkg, name := range pkgs {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			cmd := exec.CommandContext(ctx, "go", "build", "-o", filepath.Join(binDir, name), pkg)
			cmd.Dir = repoRoot()
			out, err := cmd.CombinedOutput()
			cancel()
			if err != nil {
				buildErr = fmt.Errorf("go build %s: %w\n%s", pkg, err, out)
				return
			}
		}
	})
	if buildErr != nil {
		t.Fatalf("journey: %v", buildErr)
	}
	return binDir
}

// kubernetes starts one kube-apiserver and etcd (envtest) with the Webhook CRD for the
// package and returns an admin kubeconfig; without KUBEBUILDER_ASSETS the test skips (fails
// under CI=true).
func kubernetes(t testing.TB) *kubeAccess {
	t.Helper()
	assets := testenv.KubeAssets(t)
	kubeOnce.Do(func() {
		env := &envtest.Environment{
			BinaryAssetsDirectory: assets,
			CRDDirectoryPaths:     []string{filepath.Join(repoRoot(), "config", "crd", "bases")},
			ErrorIfCRDPathMissing: true,
		}
		cfg, err := env.Start()
		if err != nil {
			kubeErr = fmt.Errorf("start envtest from %s: %w", assets, err)
			return
		}
		kubeEnv = env
		user, err := env.AddUser(envtest.User{Name: "journey", Groups: []string{"system:masters"}}, nil)
		if err != nil {
			kubeErr = fmt.Errorf("envtest user: %w", err)
			return
		}
		data, err := user.KubeConfig()
		if err != nil {
			kubeErr = fmt.Errorf("render kubeconfig: %w", err)
			return
		}
		path := filepath.Join(binDir, "kubeconfig")
		if binDir == "" {
			path = filepath.Join(os.TempDir(), fmt.Sprintf("journey-kubeconfig-%d", os.Getpid()))
		}
		if err := os.WriteFile(path, data, 0o600); err != nil {
			kubeErr = fmt.Errorf("write kubeconfig: %w", err)
			return
		}
		c, err := client.New(cfg, client.Options{})
		if err != nil {
			kubeErr = fmt.Errorf("kubernetes client: %w", err)
			return
		}
		kube = &kubeAccess{kubeconfig: path, client: c}
	})
	if kubeErr != nil {
		t.Fatalf("journey: %v", kubeErr)
	}
	return kube
}

// namespace creates a namespace of its own for a test's Webhook resources.
func (k *kubeAccess) namespace(t testing.TB) string {
	t.Helper()
	name := strings.ReplaceAll(testenv.Name("journey"), "_", "-")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := k.client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		t.Fatalf("journey: create namespace %s: %v", name, err)
	}
	return name
}
