package v1alpha1_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/partnerstream/partnerstream/api/v1alpha1"
	"github.com/partnerstream/partnerstream/internal/ids"
	"github.com/partnerstream/partnerstream/internal/webhooks/kubetest"
)

var env *kubetest.Env

func TestMain(m *testing.M) { os.Exit(kubetest.Run(m, &env)) }

func valid(ns string) *v1alpha1.Webhook {
	return &v1alpha1.Webhook{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "wh-valid-"},
		Spec: v1alpha1.WebhookSpec{
			CompanyID: ids.New(ids.Company),
			URL:       "https://receiver.example/hooks",
			Events:    []v1alpha1.EventType{v1alpha1.EventConversionCreated},
		},
	}
}

func grace(s string) *metav1.Duration {
	d, err := time.ParseDuration(s)
	if err != nil {
		panic(err)
	}
	return &metav1.Duration{Duration: d}
}

func TestTheAPIServerValidatesWebhooks(t *testing.T) {
	env.Require(t)
	ns := env.Namespace(t)
	tests := []struct {
		name   string
		change func(*v1alpha1.Webhook)
		// wantErr is a part of the API server's message; empty means the object is accepted.
		wantErr string
	}{
		{"an https URL is accepted", func(w *v1alpha1.Webhook) {}, ""},
		{"http to localhost is accepted for development", func(w *v1alpha1.Webhook) { w.Spec.URL = "http://localhost:8080/hook" }, ""},
		{"http to 127.0.0.1 is accepted", func(w *v1alpha1.Webhook) { w.Spec.URL = "http://127.0.0.1:9/x" }, ""},
		{"http to [::1] is accepted", func(w *v1alpha1.Webhook) { w.Spec.URL = "http://[::1]:9/x" }, ""},
		{"an @ in the path or query is no credential", func(w *v1alpha1.Webhook) { w.Spec.URL = "https://receiver.example/a@b?to=x@y" }, ""},
		{"http to a public host is refused", func(w *v1alpha1.Webhook) { w.Spec.URL = "http://receiver.example/hooks" },
			"url must use https:// (http:// is allowed only for localhost, 127.0.0.1 and [::1])"},
		{"http to a host that starts like localhost is refused", func(w *v1alpha1.Webhook) { w.Spec.URL = "http://localhost.evil.example/" },
			"url must use https://"},
		{"another scheme is refused", func(w *v1alpha1.Webhook) { w.Spec.URL = "ftp://receiver.example/" }, "url must use https://"},
		{"a relative URL is refused", func(w *v1alpha1.Webhook) { w.Spec.URL = "/hooks" }, "url must be an absolute URL with a host"},
		{"a port beyond 65535 is refused", func(w *v1alpha1.Webhook) { w.Spec.URL = "http://127.0.0.1:99999/x" }, "url must have a port from 1 to 65535"},
		{"port 0 is refused", func(w *v1alpha1.Webhook) { w.Spec.URL = "https://receiver.example:0/x" }, "url must have a port from 1 to 65535"},
		{"port 65535 is accepted", func(w *v1alpha1.Webhook) { w.Spec.URL = "https://receiver.example:65535/x" }, ""},
		{"a raw space is refused", func(w *v1alpha1.Webhook) { w.Spec.URL = "https://receiver.example/a b" }, "url must not contain spaces or control characters"},
		{"credentials are refused", func(w *v1alpha1.Webhook) { w.Spec.URL = "https://user:pw@receiver.example/" }, "url must not contain credentials"},
		{"a user name alone is refused", func(w *v1alpha1.Webhook) { w.Spec.URL = "https://token@receiver.example/hooks" }, "url must not contain credentials"},
		{"a tab is refused", func(w *v1alpha1.Webhook) { w.Spec.URL = "https://receiver.example/a\tb" }, "url must not contain spaces or control characters"},
		{"a percent-encoded space is accepted", func(w *v1alpha1.Webhook) { w.Spec.URL = "https://receiver.example/a%20b" }, ""},
		{"a URL longer than 2048 characters is refused", func(w *v1alpha1.Webhook) {
			w.Spec.URL = "https://receiver.example/" + strings.Repeat("a", 2048)
		}, "spec.url: Too long"},
		{"no events are refused", func(w *v1alpha1.Webhook) { w.Spec.Events = []v1alpha1.EventType{} }, "at least one event is required"},
		{"an unknown event is refused", func(w *v1alpha1.Webhook) { w.Spec.Events = []v1alpha1.EventType{"click.created"} },
			`spec.events[0]: Unsupported value: "click.created"`},
		{"a repeated event is refused", func(w *v1alpha1.Webhook) {
			w.Spec.Events = []v1alpha1.EventType{v1alpha1.EventConversionCreated, v1alpha1.EventConversionCreated}
		}, "spec.events[1]: Duplicate value"},
		{"every event at once is accepted", func(w *v1alpha1.Webhook) { w.Spec.Events = v1alpha1.EventTypes }, ""},
		{"a grace period of 0 is accepted (a leaked secret)", func(w *v1alpha1.Webhook) { w.Spec.RotationGracePeriod = grace("0s") }, ""},
		{"a grace period of 7 days is accepted", func(w *v1alpha1.Webhook) { w.Spec.RotationGracePeriod = grace("168h") }, ""},
		{"a grace period over 7 days is refused", func(w *v1alpha1.Webhook) { w.Spec.RotationGracePeriod = grace("168h1s") },
			"rotationGracePeriod must be between 0s and 168h (7 days)"},
		{"a negative grace period is refused", func(w *v1alpha1.Webhook) { w.Spec.RotationGracePeriod = grace("-1h") },
			"rotationGracePeriod must be between 0s and 168h (7 days)"},
		{"a malformed company id is refused", func(w *v1alpha1.Webhook) { w.Spec.CompanyID = "acme" }, "spec.companyID: Invalid value"},
		{"a description over 512 characters is refused", func(w *v1alpha1.Webhook) { w.Spec.Description = strings.Repeat("d", 513) },
			"spec.description: Too long"},
		{"a name longer than a DNS label is refused", func(w *v1alpha1.Webhook) { w.GenerateName, w.Name = "", strings.Repeat("n", 64) },
			"metadata.name must be at most 63 characters"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := valid(ns)
			tt.change(w)
			err := env.Client.Create(context.Background(), w)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			t.Log(err)
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("got %v, want an Invalid error containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestAGracePeriodThatIsNotADurationIsRefused(t *testing.T) {
	env.Require(t)
	for _, bad := range []string{"7d", "soon", "24"} {
		u := unstructuredWebhook(env.Namespace(t), map[string]any{"rotationGracePeriod": bad})
		err := env.Client.Create(context.Background(), u)
		t.Log(err)
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "rotationGracePeriod must be a duration such as 24h, 90m or 0s") {
			t.Errorf("%q: got %v, want an Invalid error on spec.rotationGracePeriod", bad, err)
		}
	}
}

func TestCompanyIDIsImmutable(t *testing.T) {
	env.Require(t)
	w := valid(env.Namespace(t))
	if err := env.Client.Create(context.Background(), w); err != nil {
		t.Fatal(err)
	}
	w.Spec.CompanyID = ids.New(ids.Company)
	err := env.Client.Update(context.Background(), w)
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "companyID is immutable") {
		t.Fatalf("got %v, want companyID is immutable", err)
	}
	// The rest of the spec stays editable.
	if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(w), w); err != nil {
		t.Fatal(err)
	}
	w.Spec.URL = "https://elsewhere.example/"
	if err := env.Client.Update(context.Background(), w); err != nil {
		t.Fatalf("changing the url: %v", err)
	}
}

func TestTheSampleApplies(t *testing.T) {
	env.Require(t)
	ns := env.Namespace(t)
	raw, err := os.ReadFile(filepath.Join(kubetest.RepoRoot(), "config", "samples", "partnerstream_v1alpha1_webhook.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(raw, &u.Object); err != nil {
		t.Fatal(err)
	}
	u.SetNamespace(ns)
	// What `kubectl apply --server-side` sends.
	if err := env.Client.Apply(context.Background(), client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("kubectl"), client.ForceOwnership); err != nil {
		t.Fatalf("apply the sample: %v", err)
	}
	got := &v1alpha1.Webhook{}
	if err := env.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: u.GetName()}, got); err != nil {
		t.Fatal(err)
	}
	if got.Spec.GracePeriod() != 24*time.Hour || len(got.Spec.Events) != 3 {
		t.Errorf("sample read back as %+v", got.Spec)
	}
}

func unstructuredWebhook(ns string, spec map[string]any) *unstructured.Unstructured {
	base := map[string]any{
		"companyID": ids.New(ids.Company),
		"url":       "https://receiver.example/",
		"events":    []any{"conversion.created"},
	}
	for k, v := range spec {
		base[k] = v
	}
	u := &unstructured.Unstructured{Object: map[string]any{"spec": base}}
	u.SetAPIVersion(v1alpha1.GroupVersion.String())
	u.SetKind("Webhook")
	u.SetNamespace(ns)
	u.SetGenerateName("wh-raw-")
	return u
}
