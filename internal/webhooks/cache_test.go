package webhooks

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/partnerstream/partnerstream/internal/testenv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"github.com/partnerstream/partnerstream/api/v1alpha1"
	"github.com/partnerstream/partnerstream/internal/ids"
	"github.com/partnerstream/partnerstream/internal/webhooks/signing"
)

// startCache runs a Cache on the namespace until the test ends; requests counts every HTTP
// request it makes to the API server.
func startCache(t *testing.T, ns string, now func() time.Time) (*Cache, *atomic.Int64) {
	t.Helper()
	var requests atomic.Int64
	cfg := rest.CopyConfig(env.Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			requests.Add(1)
			return rt.RoundTrip(r)
		})
	})
	c, err := NewCache(cfg, CacheOptions{Namespace: ns, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("cache: %v", err)
		}
	})
	syncCtx, syncCancel := context.WithTimeout(ctx, waitFor)
	defer syncCancel()
	if err := c.WaitForSync(syncCtx); err != nil {
		t.Fatal(err)
	}
	return c, &requests
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func targetIDs(ts []signing.Target) []string {
	out := []string{}
	for _, t := range ts {
		out = append(out, t.ID)
	}
	return out
}

func TestCacheTargetsByCompanyAndEvent(t *testing.T) {
	ns, s := withController(t)
	c, requests := startCache(t, ns, nil)
	ctx := context.Background()
	a, b := ids.New(ids.Company), ids.New(ids.Company)

	both, secret := mustCreate(t, s, a, Input{URL: "https://a.example/1", Events: []string{"conversion.created", "conversion.approved"}})
	approvedOnly, _ := mustCreate(t, s, a, Input{URL: "https://a.example/2", Events: []string{"conversion.approved"}})
	suspended, _ := mustCreate(t, s, a, Input{URL: "https://a.example/3", Events: []string{"conversion.created"}, Suspended: true})
	other, _ := mustCreate(t, s, b, Input{URL: "https://b.example/", Events: []string{"conversion.created"}})

	want := map[[2]string][]string{
		{a, "conversion.created"}:  {both.ID},
		{a, "conversion.approved"}: sorted(both.ID, approvedOnly.ID),
		{a, "partnership.created"}: {},
		{b, "conversion.created"}:  {other.ID},
		{b, "conversion.approved"}: {},
	}
	testenv.Eventually(t, waitFor, func() (bool, string) {
		for k, ids := range want {
			if got := targetIDs(c.Targets(k[0], k[1])); !slices.Equal(got, ids) {
				return false, fmt.Sprintf("Targets(%s, %s) = %v, want %v", k[0], k[1], got, ids)
			}
		}
		return true, ""
	})
	ts := c.Targets(a, "conversion.created")
	key, _ := signing.Key(secret)
	if ts[0].URL != "https://a.example/1" || len(ts[0].Secrets) != 1 || !bytes.Equal(ts[0].Secrets[0].Key, key) {
		t.Errorf("target %+v does not sign with the secret Create returned", ts[0])
	}

	// Lookups are answered from memory.
	before := requests.Load()
	for range 1000 {
		c.Targets(a, "conversion.approved")
	}
	if n := requests.Load() - before; n != 0 {
		t.Errorf("1000 lookups made %d API requests", n)
	}

	// Changes reach the index: resume the suspended one, delete another.
	resume := false
	if _, err := s.Update(ctx, a, suspended.ID, Patch{Suspended: &resume}); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, a, both.ID); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, waitFor, func() (bool, string) {
		got := targetIDs(c.Targets(a, "conversion.created"))
		return slices.Equal(got, []string{suspended.ID}), fmt.Sprintf("after resume and delete: %v", got)
	})
}

func sorted(s ...string) []string { slices.Sort(s); return s }

func TestRotateSecretKeepsTheOldSecretSigningUntilTheGraceEnds(t *testing.T) {
	ns, s := withController(t)
	clk := testenv.NewClock()
	clk.Set(time.Now())
	c, _ := startCache(t, ns, clk.Now)
	ctx := context.Background()
	a := ids.New(ids.Company)
	hour := int64(3600)
	w, old := mustCreate(t, s, a, Input{URL: "https://a.example/", Events: []string{"conversion.created"}, RotationGracePeriodSeconds: &hour})
	oldKey, _ := signing.Key(old)

	signingKeys := func() [][]byte {
		var out [][]byte
		for _, t := range c.Targets(a, "conversion.created") {
			for _, k := range t.Secrets {
				out = append(out, k.Key)
			}
		}
		return out
	}
	testenv.Eventually(t, waitFor, func() (bool, string) {
		got := signingKeys()
		return len(got) == 1 && bytes.Equal(got[0], oldKey), "the new webhook does not sign with its secret yet"
	})

	if _, err := s.RotateSecret(ctx, ids.New(ids.Company), w.ID); err == nil {
		t.Error("another company rotated the secret")
	}
	fresh, err := s.RotateSecret(ctx, a, w.ID)
	if err != nil {
		t.Fatal(err)
	}
	freshKey, err := signing.Key(fresh)
	if err != nil || fresh == old {
		t.Fatalf("RotateSecret returned no new secret: %v", err)
	}
	got, err := s.Get(ctx, a, w.ID)
	if err != nil || got.SecretRotatedAt == nil || got.PreviousSecretExpiresAt == nil {
		t.Fatalf("rotation times after RotateSecret: %+v, %v", got, err)
	}
	expires := *got.PreviousSecretExpiresAt

	// Throughout the grace period the new secret signs first and the old one still signs.
	testenv.Eventually(t, waitFor, func() (bool, string) {
		got := signingKeys()
		return len(got) == 2 && bytes.Equal(got[0], freshKey) && bytes.Equal(got[1], oldKey),
			fmt.Sprintf("%d keys during the grace period, want the new then the old", len(got))
	})
	clk.Set(expires.Add(-time.Second))
	if got := signingKeys(); len(got) != 2 {
		t.Errorf("a second before the end of the grace period %d keys sign, want 2", len(got))
	}
	// At its end only the new one does, before the controller even removes the old one.
	clk.Set(expires)
	if got := signingKeys(); len(got) != 1 || !bytes.Equal(got[0], freshKey) {
		t.Errorf("after the grace period %d keys sign, want only the new one", len(got))
	}
}

// BenchmarkTargets measures lookups among 10,000 subscriptions (of 2,000 companies, each
// webhook on 2 of the 5 events, a third of them in a rotation), fed through the same event
// handlers as the informers. heap-MB is what the objects (as the informer stores them,
// managed fields stripped) and the index take together.
func BenchmarkTargets(b *testing.B) {
	const webhooks, companies = 10_000, 2_000
	c := newIndex(CacheOptions{Now: func() time.Time { return time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC) }})
	companyIDs := make([]string, companies)
	for i := range companyIDs {
		companyIDs[i] = ids.New(ids.Company)
	}

	runtime.GC()
	var m0 runtime.MemStats
	runtime.ReadMemStats(&m0)
	store := make([]any, 0, 2*webhooks) // what the informers' stores would hold
	for i := range webhooks {
		w, sec := benchObjects(i, companyIDs[i%companies])
		c.putWebhook(w)
		c.putSecret(sec)
		store = append(store, w, sec)
	}
	runtime.GC()
	var m1 runtime.MemStats
	runtime.ReadMemStats(&m1)
	runtime.KeepAlive(store)

	b.ReportAllocs()
	b.ResetTimer()
	var found int
	for i := 0; b.Loop(); i++ {
		found += len(c.Targets(companyIDs[i%companies], string(v1alpha1.EventTypes[i%len(v1alpha1.EventTypes)])))
	}
	b.ReportMetric(float64(m1.HeapAlloc-m0.HeapAlloc)/(1<<20), "heap-MB")
	if found == 0 {
		b.Fatal("no targets found")
	}
}

func benchObjects(i int, company string) (*v1alpha1.Webhook, *corev1.Secret) {
	id := ids.New(ids.Webhook)
	name := v1alpha1.ObjectName(id)
	uid := types.UID(fmt.Sprintf("00000000-0000-4000-8000-%012d", i))
	events := v1alpha1.EventTypes
	w := &v1alpha1.Webhook{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "partnerstream", UID: uid, Generation: 1,
			Labels: map[string]string{v1alpha1.LabelCompanyID: company, v1alpha1.LabelWebhookID: id}},
		Spec: v1alpha1.WebhookSpec{CompanyID: company, URL: fmt.Sprintf("https://receiver-%d.example/hooks/partnerstream", i),
			Events: []v1alpha1.EventType{events[i%5], events[(i+1)%5]}, Description: "orders into the CRM"},
		Status: v1alpha1.WebhookStatus{ObservedGeneration: 1, SecretName: v1alpha1.SigningSecretName(name),
			Conditions: []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: "SecretReady",
				Message: "Signing secret published in Secret " + v1alpha1.SigningSecretName(name), ObservedGeneration: 1}}},
	}
	keys := signing.Keys{Current: signing.NewSecret()}
	if i%3 == 0 {
		keys.Previous, keys.PreviousExpiresAt = signing.NewSecret(), time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
	}
	sec := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.SigningSecretName(name), Namespace: "partnerstream",
			Labels:          map[string]string{v1alpha1.LabelManagedBy: v1alpha1.ManagedByController, v1alpha1.LabelCompanyID: company, v1alpha1.LabelWebhookID: id},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "partnerstream.io/v1alpha1", Kind: "Webhook", Name: name, UID: uid, Controller: new(true), BlockOwnerDeletion: new(true)}}},
		Data: keys.Data(),
	}
	return w, sec
}
