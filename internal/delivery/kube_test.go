package delivery

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/partnerstream/partnerstream/api/v1alpha1"
	"github.com/partnerstream/partnerstream/controllers"
	"github.com/partnerstream/partnerstream/internal/events"
	"github.com/partnerstream/partnerstream/internal/testenv"
	"github.com/partnerstream/partnerstream/internal/webhooks"
)

// TestWebhookResourcesEndToEnd delivers through real Webhook resources: the controller makes
// their signing Secrets, the informer cache serves them, a rotation signs with both secrets
// and a 410 suspends the resource.
func TestWebhookResourcesEndToEnd(t *testing.T) {
	env.Require(t)
	t.Parallel()
	ns := env.Namespace(t)
	env.StartManager(t, ns, func(mgr ctrl.Manager) error {
		return (&controllers.WebhookReconciler{Client: mgr.GetClient()}).SetupWithManager(mgr)
	})
	hooks := webhooks.NewService(env.Client, webhooks.Options{Namespace: ns})
	cache, err := webhooks.NewCache(env.Config, webhooks.CacheOptions{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cache.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	db, cos := newDB(t, 2)
	var code atomic.Int64
	code.Store(204)
	rc := newReceiver(t, func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(int(code.Load())) })
	w, secret, err := hooks.Create(ctx, cos[0], webhooks.Input{URL: rc.URL + "/hook", Events: []string{events.ConversionCreated}})
	if err != nil {
		t.Fatal(err)
	}
	s := newService(t, db, Options{Subscriptions: cache, Suspender: NewKubeSuspender(env.Client, ns)})
	syncCtx, syncCancel := context.WithTimeout(ctx, 30*time.Second)
	defer syncCancel()
	if err := s.o.Subscriptions.WaitForSync(syncCtx); err != nil {
		t.Fatal(err)
	}
	keys := func() int {
		for _, tg := range cache.Targets(cos[0], events.ConversionCreated) {
			if tg.ID == w.ID {
				return len(tg.Secrets)
			}
		}
		return 0
	}
	testenv.Eventually(t, 15*time.Second, func() (bool, string) { return keys() == 1, "the webhook is not in the cache" })

	deliver := func() (string, request) {
		t.Helper()
		e := envelope(events.ConversionCreated, cos[0], cos[1])
		if n, err := s.record(ctx, []events.Envelope{e}); err != nil || n != 1 {
			t.Fatalf("recorded %d deliveries (%v), want 1", n, err)
		}
		if outs := s.step(t); len(outs) != 1 {
			t.Fatalf("%d attempts, want 1", len(outs))
		}
		got := rc.requests()
		return rows(t, db, "WHERE event_id = $1", e.ID)[0].id, got[len(got)-1]
	}
	_, first := deliver()
	if err := verify(t, first, secret, true); err != nil {
		t.Errorf("the delivery does not verify with the webhook's secret: %v", err)
	}

	fresh, err := hooks.RotateSecret(ctx, cos[0], w.ID)
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 15*time.Second, func() (bool, string) { return keys() == 2, "the cache does not have both secrets" })
	_, during := deliver()
	for name, sec := range map[string]string{"new": fresh, "old": secret} {
		if err := verify(t, during, sec, true); err != nil {
			t.Errorf("during the rotation the %s secret does not verify: %v", name, err)
		}
	}

	code.Store(410)
	id, _ := deliver()
	if r := rows(t, db, "WHERE id = $1", id)[0]; r.status != StatusFailed || !strings.Contains(deref(r.lastError), "410") {
		t.Errorf("after a 410: status %s, error %s", r.status, deref(r.lastError))
	}
	testenv.Eventually(t, 15*time.Second, func() (bool, string) {
		var list v1alpha1.WebhookList
		if err := env.Client.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{v1alpha1.LabelWebhookID: w.ID}); err != nil || len(list.Items) != 1 {
			return false, fmt.Sprintf("list: %v", err)
		}
		return list.Items[0].Spec.Suspend, "the webhook answered 410 is not suspended"
	})
	// Suspended, it is no target any more: a new event records nothing for it.
	testenv.Eventually(t, 15*time.Second, func() (bool, string) { return keys() == 0, "the suspended webhook is still a target" })
	if n, err := s.record(ctx, []events.Envelope{envelope(events.ConversionCreated, cos[0], cos[1])}); err != nil || n != 0 {
		t.Errorf("an event for the suspended webhook recorded %d deliveries (%v)", n, err)
	}
}
