package chart

import (
	"context"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// kustomizeBuild builds a kustomization of config/ as `kubectl apply -k` would.
func kustomizeBuild(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	resources, err := k.Run(filesys.MakeFsOnDisk(), filepath.Join(repoRoot, "config", dir))
	if err != nil {
		t.Fatalf("kustomize build config/%s: %v", dir, err)
	}
	var out []*unstructured.Unstructured
	for _, r := range resources.Resources() {
		// Through JSON, so that numbers are int64 as the API machinery expects.
		b, err := r.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(b); err != nil {
			t.Fatal(err)
		}
		out = append(out, u)
	}
	return out
}

// TestKustomizeBasesApply builds the kustomize bases of config/ and applies every object to
// the API server with a server-side dry run (the sample Webhook passes the CRD's CEL rules).
func TestKustomizeBasesApply(t *testing.T) {
	want := map[string][]string{
		"default": {"CustomResourceDefinition", "Namespace", "ServiceAccount", "ClusterRole", "ClusterRole", "RoleBinding", "ClusterRoleBinding", "Deployment"},
		"samples": {"Webhook"},
	}
	built := map[string][]*unstructured.Unstructured{}
	for dir, kinds := range want {
		objs := kustomizeBuild(t, dir)
		got := map[string]int{}
		for _, o := range objs {
			got[o.GetKind()]++
		}
		wantCount := map[string]int{}
		for _, k := range kinds {
			wantCount[k]++
		}
		for k, n := range wantCount {
			if got[k] != n {
				t.Errorf("config/%s: %d %s objects, want %d (all: %v)", dir, got[k], k, n, got)
			}
		}
		built[dir] = objs
	}
	for _, o := range built["default"] {
		if ns := o.GetNamespace(); ns != "" && ns != "partnerstream" {
			t.Errorf("config/default: %s %s is in namespace %s", o.GetKind(), o.GetName(), ns)
		}
	}

	env.Require(t)
	a := newApplier(t)
	// Namespaced dry runs need the namespace to exist.
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "partnerstream", Labels: map[string]string{"pod-security.kubernetes.io/warn": "restricted"}}}
	if err := a.c.Create(context.Background(), ns); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	for _, o := range built["default"] {
		warns, err := a.dryRun(o)
		if err != nil || len(warns) > 0 {
			t.Errorf("config/default: %s %s: error %v, warnings %v", o.GetKind(), o.GetName(), err, warns)
		}
	}
	for _, o := range built["samples"] {
		o.SetNamespace("partnerstream")
		if _, err := a.dryRun(o); err != nil {
			t.Errorf("config/samples: %s %s: %v", o.GetKind(), o.GetName(), err)
		}
	}
}
