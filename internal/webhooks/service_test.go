package webhooks

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/partnerstream/partnerstream/api/v1alpha1"
	"github.com/partnerstream/partnerstream/controllers"
	"github.com/partnerstream/partnerstream/internal/ids"
	"github.com/partnerstream/partnerstream/internal/page"
	"github.com/partnerstream/partnerstream/internal/testenv"
	"github.com/partnerstream/partnerstream/internal/webhooks/kubetest"
	"github.com/partnerstream/partnerstream/internal/webhooks/signing"
)

var env *kubetest.Env

func TestMain(m *testing.M) { os.Exit(kubetest.Run(m, &env)) }

const waitFor = 15 * time.Second

// withController gives the test a namespace with the controller running on it and a
// Service on that namespace.
func withController(t *testing.T) (string, *Service) {
	t.Helper()
	env.Require(t)
	ns := env.Namespace(t)
	env.StartManager(t, ns, func(mgr ctrl.Manager) error {
		return (&controllers.WebhookReconciler{Client: mgr.GetClient()}).SetupWithManager(mgr)
	})
	return ns, NewService(env.Client, Options{Namespace: ns})
}

func input() Input {
	return Input{URL: "https://receiver.example/hooks", Events: []string{"conversion.created"}, Description: "orders"}
}

func mustCreate(t *testing.T, s *Service, company string, in Input) (Webhook, string) {
	t.Helper()
	w, secret, err := s.Create(context.Background(), company, in)
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	return w, secret
}

func listIDs(t *testing.T, s *Service, company string) []string {
	t.Helper()
	l, err := s.List(context.Background(), company, page.Request{Limit: page.MaxLimit})
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	var out []string
	for _, w := range l.Data {
		out = append(out, w.ID)
	}
	return out
}

func TestCreateReturnsTheSecretOnceAndScopesToTheCompany(t *testing.T) {
	ns, s := withController(t)
	ctx := context.Background()
	a, b := ids.New(ids.Company), ids.New(ids.Company)

	w, secret, err := s.Create(ctx, a, input())
	if err != nil {
		t.Fatal(err)
	}
	if !ids.Valid(ids.Webhook, w.ID) || w.CompanyID != a || !w.Ready || w.RotationGracePeriodSeconds != 86400 {
		t.Errorf("created %+v", w)
	}
	if _, err := signing.Key(secret); err != nil {
		t.Errorf("returned secret: %v", err)
	}
	stored := &corev1.Secret{}
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: v1alpha1.SigningSecretName(v1alpha1.ObjectName(w.ID))}, stored); err != nil {
		t.Fatal(err)
	}
	if string(stored.Data[v1alpha1.SecretKeyCurrent]) != secret {
		t.Error("the returned secret is not the one that signs")
	}

	got, err := s.Get(ctx, a, w.ID)
	if err != nil || got.ID != w.ID || got.URL != "https://receiver.example/hooks" || got.Description != "orders" {
		t.Errorf("get by its company: %+v, %v", got, err)
	}
	if _, err := s.Get(ctx, b, w.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("get by another company: %v, want ErrNotFound", err)
	}
	if ids := listIDs(t, s, a); !slices.Equal(ids, []string{w.ID}) {
		t.Errorf("list of its company = %v", ids)
	}
	if ids := listIDs(t, s, b); len(ids) != 0 {
		t.Errorf("list of another company = %v", ids)
	}
}

func TestAWebhookAppliedWithKubectlIsListedForItsCompanyOnly(t *testing.T) {
	ns, s := withController(t)
	a, b := ids.New(ids.Company), ids.New(ids.Company)
	raw, err := os.ReadFile(filepath.Join(kubetest.RepoRoot(), "config", "samples", "partnerstream_v1alpha1_webhook.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(raw, &u.Object); err != nil {
		t.Fatal(err)
	}
	u.SetNamespace(ns)
	if err := unstructured.SetNestedField(u.Object, a, "spec", "companyID"); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Apply(context.Background(), client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("kubectl")); err != nil {
		t.Fatalf("apply: %v", err)
	}

	var id string
	testenv.Eventually(t, waitFor, func() (bool, string) {
		got := listIDs(t, s, a)
		if len(got) == 1 {
			id = got[0]
		}
		return len(got) == 1, "not listed yet"
	})
	w, err := s.Get(context.Background(), a, id)
	if err != nil || w.URL != "https://hooks.acme.example/partnerstream" || len(w.Events) != 3 {
		t.Errorf("get %s: %+v, %v", id, w, err)
	}
	if got := listIDs(t, s, b); len(got) != 0 {
		t.Errorf("another company lists %v", got)
	}
	if _, err := s.Get(context.Background(), b, id); !errors.Is(err, ErrNotFound) {
		t.Errorf("another company gets it: %v", err)
	}
}

func TestUpdate(t *testing.T) {
	_, s := withController(t)
	ctx := context.Background()
	a := ids.New(ids.Company)
	w, _ := mustCreate(t, s, a, input())

	url, desc, grace := "https://elsewhere.example/in", "", int64(0)
	got, err := s.Update(ctx, a, w.ID, Patch{URL: &url, Description: &desc, Events: []string{"conversion.approved", "partnership.created"},
		RotationGracePeriodSeconds: &grace})
	if err != nil {
		t.Fatal(err)
	}
	if got.URL != url || got.Description != "" || !slices.Equal(got.Events, []string{"conversion.approved", "partnership.created"}) ||
		got.RotationGracePeriodSeconds != 0 {
		t.Errorf("updated = %+v", got)
	}
	testenv.Eventually(t, waitFor, func() (bool, string) {
		got, _ = s.Get(ctx, a, w.ID)
		return got.Ready, "the new generation is not Ready"
	})

	if _, err := s.Update(ctx, ids.New(ids.Company), w.ID, Patch{URL: &url}); !errors.Is(err, ErrNotFound) {
		t.Errorf("update by another company: %v, want ErrNotFound", err)
	}
}

func TestTheAPIServersRefusalIsAValidationError(t *testing.T) {
	_, s := withController(t)
	ctx := context.Background()
	a := ids.New(ids.Company)
	w, _ := mustCreate(t, s, a, input())

	tests := []struct {
		name      string
		do        func() error
		field     string
		inMessage string
	}{
		{"http to a public host on create", func() error {
			in := input()
			in.URL = "http://receiver.example/"
			_, _, err := s.Create(ctx, a, in)
			return err
		}, "url", "url must use https://"},
		{"no events on create", func() error {
			in := input()
			in.Events = []string{}
			_, _, err := s.Create(ctx, a, in)
			return err
		}, "events", "at least one event is required"},
		{"an unknown event on update", func() error {
			_, err := s.Update(ctx, a, w.ID, Patch{Events: []string{"click.created"}})
			return err
		}, "events[0]", "Unsupported value"},
		{"a grace period over 7 days on update", func() error {
			week := int64(7*24*3600 + 1)
			_, err := s.Update(ctx, a, w.ID, Patch{RotationGracePeriodSeconds: &week})
			return err
		}, "rotation_grace_period_seconds", "between 0s and 168h"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.do()
			var v *ValidationError
			if !errors.As(err, &v) {
				t.Fatalf("got %v, want a ValidationError", err)
			}
			if !strings.Contains(v.Message, tt.inMessage) || len(v.Fields) != 1 || v.Fields[0].Field != tt.field ||
				!strings.Contains(v.Fields[0].Message, tt.inMessage) {
				t.Errorf("got %q %+v, want field %q with %q", v.Message, v.Fields, tt.field, tt.inMessage)
			}
		})
	}
	if got := listIDs(t, s, a); len(got) != 1 {
		t.Errorf("refused creates left objects: %v", got)
	}
}

func TestDelete(t *testing.T) {
	_, s := withController(t)
	ctx := context.Background()
	a := ids.New(ids.Company)
	w, _ := mustCreate(t, s, a, input())

	if err := s.Delete(ctx, ids.New(ids.Company), w.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("delete by another company: %v, want ErrNotFound", err)
	}
	if _, err := s.Get(ctx, a, w.ID); err != nil {
		t.Fatalf("another company's delete removed it: %v", err)
	}
	if err := s.Delete(ctx, a, w.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, a, w.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("get after delete: %v", err)
	}
	if err := s.Delete(ctx, a, w.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("second delete: %v", err)
	}
}

func TestMalformedIDsAreNotFound(t *testing.T) {
	_, s := withController(t)
	for _, id := range []string{"", "wh_", "wh_../../x", "co_01", v1alpha1.ObjectName(ids.New(ids.Webhook))} {
		if _, err := s.Get(context.Background(), ids.New(ids.Company), id); !errors.Is(err, ErrNotFound) {
			t.Errorf("get %q: %v", id, err)
		}
	}
}

func TestListPagesNewestFirst(t *testing.T) {
	_, s := withController(t)
	ctx := context.Background()
	a := ids.New(ids.Company)
	var made []string
	for range 3 {
		w, _ := mustCreate(t, s, a, input())
		made = append(made, w.ID)
	}
	first, err := s.List(ctx, a, page.Request{Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(first.Data) != 2 || first.Data[0].ID != made[2] || first.Data[1].ID != made[1] || first.NextCursor == "" {
		t.Fatalf("first page %+v", first)
	}
	req, err := page.Parse("2", first.NextCursor)
	if err != nil {
		t.Fatal(err)
	}
	second, err := s.List(ctx, a, req)
	if err != nil {
		t.Fatal(err)
	}
	if len(second.Data) != 1 || second.Data[0].ID != made[0] || second.NextCursor != "" {
		t.Fatalf("second page %+v", second)
	}
}

func TestCreateWithoutAControllerGivesUp(t *testing.T) {
	env.Require(t)
	ns := env.Namespace(t) // no controller runs here
	s := NewService(env.Client, Options{Namespace: ns, Wait: 300 * time.Millisecond})
	a := ids.New(ids.Company)
	_, secret, err := s.Create(context.Background(), a, input())
	if !errors.Is(err, ErrNotReady) || secret != "" {
		t.Fatalf("got %q, %v; want ErrNotReady", secret, err)
	}
	var list v1alpha1.WebhookList
	if err := env.Client.List(context.Background(), &list, client.InNamespace(ns)); err != nil || len(list.Items) != 0 {
		t.Errorf("the unfinished webhook was left behind: %d objects, %v", len(list.Items), err)
	}
}
