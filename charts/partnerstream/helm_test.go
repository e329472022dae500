package chart

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	k8syaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/partnerstream/partnerstream/internal/webhooks/kubetest"
)

// The helpers that run the pinned helm CLI (bin/helm, built by hack/helm.sh) on the chart.

var repoRoot = kubetest.RepoRoot()

var chartDir = filepath.Join(repoRoot, "charts", "partnerstream")

// helmBin is bin/helm; without it the test is skipped, or fails under CI=true.
func helmBin(t testing.TB) string {
	t.Helper()
	bin := filepath.Join(repoRoot, "bin", "helm")
	if _, err := os.Stat(bin); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is missing: run the tests through `make test` (CI must not skip)", bin)
		}
		t.Skipf("%s is missing: run `bash hack/helm.sh install` or `make test`", bin)
	}
	return bin
}

// runHelm runs helm with args and returns its stdout, or an error carrying its stderr.
func runHelm(t testing.TB, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(helmBin(t), args...)
	// A private HELM_* home: the user's repositories and plugins play no part.
	home := t.TempDir()
	cmd.Env = append(os.Environ(), "HELM_CONFIG_HOME="+home, "HELM_CACHE_HOME="+home, "HELM_DATA_HOME="+home)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("helm %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// valuesFile writes a values file for the test and returns its path. (Not under t.TempDir:
// helm splits -f on commas, which test names contain.)
func valuesFile(t testing.TB, values string) string {
	t.Helper()
	f, err := os.CreateTemp("", "partnerstream-values-*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Remove(f.Name()) })
	if _, err := f.WriteString(values); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return f.Name()
}

// release is what `helm template` rendered.
type release struct {
	Namespace string
	Objects   []*unstructured.Unstructured
}

const releaseName = "ps"

// render runs `helm template` of the chart in namespace ns with the values (YAML) and any
// extra helm arguments.
func render(t testing.TB, ns, values string, extra ...string) (*release, error) {
	t.Helper()
	args := append([]string{"template", releaseName, chartDir, "--namespace", ns, "-f", valuesFile(t, values)}, extra...)
	out, err := runHelm(t, args...)
	if err != nil {
		return nil, err
	}
	r := &release{Namespace: ns}
	dec := k8syaml.NewYAMLOrJSONDecoder(strings.NewReader(out), 4096)
	for {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return nil, fmt.Errorf("decode rendered chart: %w", err)
		}
		if len(m) == 0 {
			continue // an empty document between separators
		}
		r.Objects = append(r.Objects, &unstructured.Unstructured{Object: m})
	}
	return r, nil
}

func mustRender(t testing.TB, ns, values string) *release {
	t.Helper()
	r, err := render(t, ns, values)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// All returns the objects of a kind.
func (r *release) All(kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range r.Objects {
		if o.GetKind() == kind {
			out = append(out, o)
		}
	}
	return out
}

// Typed converts every object of a kind into its Go type (T is e.g. appsv1.Deployment).
func typed[T any](t testing.TB, r *release, kind string) []*T {
	t.Helper()
	var out []*T
	for _, o := range r.All(kind) {
		v := new(T)
		if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(o.Object, v, true); err != nil {
			t.Fatalf("%s %s: %v", kind, o.GetName(), err)
		}
		out = append(out, v)
	}
	return out
}

// one is the single object of a kind whose name ends with suffix.
func one[T any](t testing.TB, r *release, kind, suffix string) *T {
	t.Helper()
	var found *T
	for i, o := range r.All(kind) {
		if strings.HasSuffix(o.GetName(), suffix) {
			if found != nil {
				t.Fatalf("two %s objects end with %q", kind, suffix)
			}
			found = typed[T](t, r, kind)[i]
		}
	}
	if found == nil {
		t.Fatalf("no %s ending with %q", kind, suffix)
	}
	return found
}
