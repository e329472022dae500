package chart

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/partnerstream/partnerstream/internal/testenv"
	"github.com/partnerstream/partnerstream/internal/webhooks/kubetest"
)

var env *kubetest.Env

func TestMain(m *testing.M) { os.Exit(kubetest.Run(m, &env)) }

// warnings collects the API server's warnings (Pod Security among them) per request.
type warnings struct {
	mu   sync.Mutex
	list []string
}

func (w *warnings) HandleWarningHeaderWithContext(_ context.Context, _ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.list = append(w.list, text)
}

func (w *warnings) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.list
	w.list = nil
	return out
}

// applier applies objects with server-side apply as a dry run, so the API server validates
// them (schemas, CEL, admission) without creating anything.
type applier struct {
	c        client.Client
	warnings *warnings
}

func newApplier(t *testing.T) *applier {
	t.Helper()
	cfg := rest.CopyConfig(env.Config)
	w := &warnings{}
	cfg.WarningHandlerWithContext = w
	scheme := kubetest.Scheme()
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return &applier{c: c, warnings: w}
}

// dryRun applies obj and returns the API server's error and warnings.
func (a *applier) dryRun(obj *unstructured.Unstructured) ([]string, error) {
	a.warnings.take()
	err := a.c.Apply(context.Background(), client.ApplyConfigurationFromUnstructured(obj.DeepCopy()), client.DryRunAll, client.ForceOwnership, client.FieldOwner("helm"))
	return a.warnings.take(), err
}

// restrictedNamespace makes a namespace whose Pod Security level is restricted: the API
// server warns about any workload whose pods would not be admitted there.
func restrictedNamespace(t *testing.T, a *applier, name string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, GenerateName: "chart-", Labels: map[string]string{
		"pod-security.kubernetes.io/enforce": "restricted",
		"pod-security.kubernetes.io/warn":    "restricted",
	}}}
	if name != "" {
		ns.GenerateName = ""
	}
	if err := a.c.Create(context.Background(), ns); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create namespace: %v", err)
	}
	return ns.Name
}

// TestChartAppliesToAPIServer renders every case into a namespace of a real kube-apiserver
// (envtest) and applies each object with a server-side dry run; the API server must accept
// all of them without a warning. The Prometheus Operator's ServiceMonitor and PrometheusRule
// are checked against minimal CRDs (their spec is not validated here, only that they are
// well-formed objects of those kinds), installed by installMonitoringCRDs.
func TestChartAppliesToAPIServer(t *testing.T) {
	env.Require(t)
	a := newApplier(t)
	installMonitoringCRDs(t, a.c)

	t.Run("the API server warns about a pod that is not restricted (the check can fail)", func(t *testing.T) {
		ns := restrictedNamespace(t, a, "")
		d := &appsv1.Deployment{
			TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
			ObjectMeta: metav1.ObjectMeta{Name: "loose", Namespace: ns},
			Spec: appsv1.DeploymentSpec{
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "loose"}},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "loose"}},
					Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
				},
			},
		}
		u, err := toUnstructured(d)
		if err != nil {
			t.Fatal(err)
		}
		warns, err := a.dryRun(u)
		if err != nil || len(warns) == 0 {
			t.Fatalf("dry run of an unrestricted Deployment: error %v, warnings %v; want a Pod Security warning", err, warns)
		}
	})

	for _, tc := range chartCases {
		t.Run(tc.name, func(t *testing.T) {
			ns := restrictedNamespace(t, a, "")
			r := mustRender(t, ns, tc.values)
			// Helm creates namespaces before what goes in them; a dry run would not.
			for _, obj := range r.All("Namespace") {
				if err := a.c.Create(context.Background(), obj.DeepCopy()); err != nil && !apierrors.IsAlreadyExists(err) {
					t.Fatalf("create the chart's namespace %s: %v", obj.GetName(), err)
				}
			}
			// The webhookNamespace of the case that leaves it to the cluster admin.
			restrictedNamespace(t, a, ns+"-webhooks")
			for _, obj := range r.Objects {
				warns, err := a.dryRun(obj)
				if err != nil {
					t.Errorf("%s %s: %v", obj.GetKind(), obj.GetName(), err)
				}
				if len(warns) > 0 {
					t.Errorf("%s %s: the API server warns: %s", obj.GetKind(), obj.GetName(), strings.Join(warns, "; "))
				}
			}
		})
	}

	t.Run("the API server rejects an invalid object (the check can fail)", func(t *testing.T) {
		r := mustRender(t, restrictedNamespace(t, a, ""), allOptions)
		np := r.All("NetworkPolicy")[0].DeepCopy()
		if err := unstructured.SetNestedStringSlice(np.Object, []string{"Sideways"}, "spec", "policyTypes"); err != nil {
			t.Fatal(err)
		}
		if _, err := a.dryRun(np); !apierrors.IsInvalid(err) {
			t.Fatalf("dry run of a NetworkPolicy with policyTypes [Sideways]: %v, want Invalid", err)
		}
	})
}

func toUnstructured(obj any) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	return &unstructured.Unstructured{Object: m}, nil
}

// installMonitoringCRDs creates minimal CRDs for monitoring.coreos.com ServiceMonitor and
// PrometheusRule (spec left unvalidated) so that the dry runs of those kinds reach a server
// that knows them.
func installMonitoringCRDs(t *testing.T, c client.Client) {
	t.Helper()
	ctx := context.Background()
	for _, kind := range []string{"ServiceMonitor", "PrometheusRule"} {
		plural := strings.ToLower(kind) + "s"
		preserve := true
		crd := &apiextensionsv1.CustomResourceDefinition{
			ObjectMeta: metav1.ObjectMeta{Name: plural + ".monitoring.coreos.com"},
			Spec: apiextensionsv1.CustomResourceDefinitionSpec{
				Group: "monitoring.coreos.com",
				Names: apiextensionsv1.CustomResourceDefinitionNames{Kind: kind, ListKind: kind + "List", Plural: plural, Singular: strings.ToLower(kind)},
				Scope: apiextensionsv1.NamespaceScoped,
				Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
					Name: "v1", Served: true, Storage: true,
					Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
						Type: "object",
						Properties: map[string]apiextensionsv1.JSONSchemaProps{
							"spec": {Type: "object", XPreserveUnknownFields: &preserve},
						},
					}},
				}},
			},
		}
		if err := c.Create(ctx, crd); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("create CRD %s: %v", crd.Name, err)
		}
	}
	testenv.Eventually(t, 30*time.Second, func() (bool, string) {
		for _, kind := range []string{"ServiceMonitor", "PrometheusRule"} {
			if _, err := c.RESTMapper().RESTMapping(schema.GroupKind{Group: "monitoring.coreos.com", Kind: kind}, "v1"); err != nil {
				return false, fmt.Sprintf("%s is not served yet: %v", kind, err)
			}
		}
		return true, ""
	})
}
