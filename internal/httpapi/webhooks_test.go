package httpapi_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/partnerstream/partnerstream/api/v1alpha1"
	"github.com/partnerstream/partnerstream/controllers"
	"github.com/partnerstream/partnerstream/internal/httpapi"
	"github.com/partnerstream/partnerstream/internal/identity"
	"github.com/partnerstream/partnerstream/internal/ids"
	"github.com/partnerstream/partnerstream/internal/page"
	"github.com/partnerstream/partnerstream/internal/testenv"
	"github.com/partnerstream/partnerstream/internal/webhooks"
	"github.com/partnerstream/partnerstream/internal/webhooks/signing"
)

// webhookFixture is the API fixture with the webhook routes on a namespace of the control
// plane, where the real controller runs with a clock the test can move.
type webhookFixture struct {
	*fixture
	ns   string
	skew atomic.Int64 // moves the controller's clock forward (nanoseconds)
	// Dashboard sessions and API keys of both companies.
	adv, aff, member map[string]string
	advKey, affKey   map[string]string
}

func newWebhookFixture(t *testing.T) *webhookFixture {
	t.Helper()
	kube.Require(t)
	f := &webhookFixture{fixture: newBareFixture(t), ns: kube.Namespace(t)}
	kube.StartManager(t, f.ns, func(mgr ctrl.Manager) error {
		r := &controllers.WebhookReconciler{Client: mgr.GetClient(), Now: func() time.Time { return time.Now().Add(time.Duration(f.skew.Load())) }}
		return r.SetupWithManager(mgr)
	})
	f.srv.MountWebhooks(webhooks.NewService(kube.Client, webhooks.Options{Namespace: f.ns}))
	f.adv, f.aff, f.member = f.dashboardAs(t, "advertiser", "owner"), f.dashboardAs(t, "affiliate", "admin"), f.dashboardAs(t, "advertiser", "member")
	f.advKey, f.affKey = apiKey(f.fixture.adv), apiKey(f.fixture.aff)
	return f
}

const orderHook = `{"url": "https://receiver.example/hooks", "events": ["conversion.created", "conversion.approved"], "description": "orders"}`

// create makes a webhook through the API and returns its id and secret.
func (f *webhookFixture) create(t *testing.T, who map[string]string, body string) (string, string) {
	t.Helper()
	r := f.do(t, "POST", "/api/webhooks", who, body)
	if r.status != 201 {
		t.Fatalf("create = %d %s", r.status, r.raw)
	}
	w := decode[webhook](t, r)
	return w.ID, str(w.Secret)
}

// signingSecret reads the Webhook's signing Secret as the delivery workers would.
func (f *webhookFixture) signingSecret(t *testing.T, id string) signing.Keys {
	t.Helper()
	var sec corev1.Secret
	name := v1alpha1.SigningSecretName(v1alpha1.ObjectName(id))
	if err := kube.Client.Get(context.Background(), types.NamespacedName{Namespace: f.ns, Name: name}, &sec); err != nil {
		t.Fatalf("get Secret %s: %v", name, err)
	}
	keys, err := signing.FromData(sec.Data)
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

// webhook is a webhook answer; a pointer tells a missing field (or null) from an empty one.
type webhook struct {
	ID                         string   `json:"id"`
	CompanyID                  string   `json:"company_id"`
	URL                        string   `json:"url"`
	Description                string   `json:"description"`
	Events                     []string `json:"events"`
	Ready                      bool     `json:"ready"`
	Suspended                  bool     `json:"suspended"`
	RotationGracePeriodSeconds int64    `json:"rotation_grace_period_seconds"`
	Secret                     *string  `json:"secret"`
	PreviousSecretExpiresAt    *string  `json:"previous_secret_expires_at"`
}

// standardSignature is the Standard Webhooks v1 signature of a delivery.
func standardSignature(key []byte, msgID, timestamp string, body []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(msgID + "." + timestamp + "."))
	m.Write(body)
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}

func TestCreatingAWebhookReturnsTheSecretThatSigns(t *testing.T) {
	f := newWebhookFixture(t)
	r := f.do(t, "POST", "/api/webhooks", f.adv, orderHook)
	if r.status != 201 {
		t.Fatalf("create = %d %s", r.status, r.raw)
	}
	w := decode[webhook](t, r)
	if w.CompanyID != f.advID || !w.Ready || w.RotationGracePeriodSeconds != 86400 ||
		w.URL != "https://receiver.example/hooks" || w.Description != "orders" || r.header.Get("Cache-Control") != "no-store" || w.Secret == nil {
		t.Fatalf("created %s", r.raw)
	}
	id, secret := w.ID, *w.Secret
	returned, err := signing.Key(secret)
	if err != nil {
		t.Fatalf("the returned secret: %v", err)
	}
	// A delivery signed with the Secret's key verifies with the secret the API returned.
	stored, err := signing.Key(f.signingSecret(t, id).Current)
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"event":"conversion.created","data":{"id":"cnv_1"},"timestamp":"2026-03-01T12:00:00Z"}`)
	sent := standardSignature(stored, "msg_1", "1772366400", body)
	if !hmac.Equal([]byte(sent), []byte(standardSignature(returned, "msg_1", "1772366400", body))) {
		t.Fatal("a signature made with the Secret's key does not verify with the returned secret")
	}

	got := f.do(t, "GET", "/api/webhooks/"+id, f.adv, "")
	if w := decode[webhook](t, got); got.status != 200 || w.ID != id || w.Secret != nil || strings.Contains(got.raw, secret) {
		t.Fatalf("get = %d %s", got.status, got.raw)
	}
	if l := f.do(t, "GET", "/api/webhooks", f.adv, ""); strings.Contains(l.raw, secret) || !slices.Contains(idsOf(t, l), id) {
		t.Fatalf("list = %s", l.raw)
	}
}

func TestACompanyNeverReachesAnothersWebhook(t *testing.T) {
	f := newWebhookFixture(t)
	id, _ := f.create(t, f.adv, orderHook)
	cases := []struct {
		name, method, path, body string
	}{
		{"another company's get is 404", "GET", "/api/webhooks/" + id, ""},
		{"another company's patch is 404", "PATCH", "/api/webhooks/" + id, `{"description": "mine now"}`},
		{"another company's rotation is 404", "PUT", "/api/webhooks/" + id + "/rotate-secret", ""},
		{"another company's delete is 404", "DELETE", "/api/webhooks/" + id, ""},
		{"a malformed id is 404", "GET", "/api/webhooks/wh-not-an-id", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if r := f.do(t, c.method, c.path, f.aff, c.body); r.status != 404 || r.problem.Code != "not_found" {
				t.Fatalf("%s %s = %d %s", c.method, c.path, r.status, r.raw)
			}
		})
	}
	if ids := idsOf(t, f.do(t, "GET", "/api/webhooks", f.aff, "")); len(ids) != 0 {
		t.Fatalf("the other company lists %v", ids)
	}
	if got := f.do(t, "GET", "/api/webhooks/"+id, f.adv, ""); decode[webhook](t, got).Description != "orders" {
		t.Fatalf("the other company's PATCH changed it: %s", got.raw)
	}
	if ids := idsOf(t, f.do(t, "GET", "/api/webhooks", f.adv, "")); len(ids) != 1 || ids[0] != id {
		t.Fatalf("the owner lists %v", ids)
	}
}

func TestPatchingAndDeletingAWebhook(t *testing.T) {
	f := newWebhookFixture(t)
	id, _ := f.create(t, f.adv, orderHook)
	r := f.do(t, "PATCH", "/api/webhooks/"+id, f.adv, `{"url": "https://elsewhere.example/h", "events": ["partnership.created"], "suspended": true, "rotation_grace_period_seconds": 3600}`)
	w := decode[webhook](t, r)
	if r.status != 200 || w.URL != "https://elsewhere.example/h" || !w.Suspended ||
		w.RotationGracePeriodSeconds != 3600 || w.Description != "orders" {
		t.Fatalf("patch = %d %s", r.status, r.raw)
	}
	if ev := w.Events; len(ev) != 1 || ev[0] != "partnership.created" {
		t.Fatalf("events after patch: %v", ev)
	}
	if r := f.do(t, "DELETE", "/api/webhooks/"+id, f.adv, ""); r.status != 204 {
		t.Fatalf("delete = %d %s", r.status, r.raw)
	}
	if r := f.do(t, "GET", "/api/webhooks/"+id, f.adv, ""); r.status != 404 {
		t.Fatalf("get after delete = %d", r.status)
	}
	if r := f.do(t, "DELETE", "/api/webhooks/"+id, f.adv, ""); r.status != 404 {
		t.Fatalf("second delete = %d", r.status)
	}
}

func TestAWebhookAppliedWithKubectlAppearsInItsCompanysListOnly(t *testing.T) {
	f := newWebhookFixture(t)
	w := &v1alpha1.Webhook{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "acme-orders"},
		Spec: v1alpha1.WebhookSpec{CompanyID: f.advID, URL: "https://hooks.acme.example/partnerstream",
			Events: []v1alpha1.EventType{v1alpha1.EventConversionCreated}},
	}
	if err := kube.Client.Create(context.Background(), w); err != nil {
		t.Fatal(err)
	}
	var id string
	testenv.Eventually(t, 15*time.Second, func() (bool, string) {
		r := f.do(t, "GET", "/api/webhooks", f.adv, "")
		for _, d := range decode[list[webhook]](t, r).Data {
			if d.URL == "https://hooks.acme.example/partnerstream" {
				id = d.ID
				return true, ""
			}
		}
		return false, "the applied Webhook is not in its company's list: " + r.raw
	})
	if ids := idsOf(t, f.do(t, "GET", "/api/v1/webhooks", f.advKey, "")); !slices.Contains(ids, id) {
		t.Fatalf("the public API does not list it: %v", ids)
	}
	if r := f.do(t, "GET", "/api/webhooks/"+id, f.adv, ""); r.status != 200 || decode[webhook](t, r).ID != id {
		t.Fatalf("get by its company = %d %s", r.status, r.raw)
	}
	for name, who := range map[string]map[string]string{"dashboard": f.aff, "public API": f.affKey} {
		path := "/api/webhooks"
		if name == "public API" {
			path = "/api/v1/webhooks"
		}
		if ids := idsOf(t, f.do(t, "GET", path, who, "")); slices.Contains(ids, id) {
			t.Errorf("another company's %s list has it", name)
		}
	}
	if r := f.do(t, "GET", "/api/webhooks/"+id, f.aff, ""); r.status != 404 {
		t.Fatalf("get by another company = %d", r.status)
	}
}

func TestRotationReturnsANewSecretAndTheOldOneSignsUntilTheGraceEnds(t *testing.T) {
	f := newWebhookFixture(t)
	id, first := f.create(t, f.adv, orderHook)
	before := time.Now().Truncate(time.Second)
	r := f.do(t, "PUT", "/api/webhooks/"+id+"/rotate-secret", f.adv, "")
	if r.status != 200 || r.header.Get("Cache-Control") != "no-store" {
		t.Fatalf("rotate = %d %s", r.status, r.raw)
	}
	rotated := decode[webhook](t, r)
	second := str(rotated.Secret)
	if _, err := signing.Key(second); err != nil || second == first {
		t.Fatalf("rotation returned %q...: %v", second[:min(len(second), 8)], err)
	}
	expires, err := time.Parse(time.RFC3339, str(rotated.PreviousSecretExpiresAt))
	if err != nil || expires.Before(before.Add(24*time.Hour)) || expires.After(time.Now().Add(24*time.Hour)) {
		t.Fatalf("previous_secret_expires_at = %v, want about 24h from now", str(rotated.PreviousSecretExpiresAt))
	}
	keys := f.signingSecret(t, id)
	if keys.Current != second || keys.Previous != first || !keys.PreviousExpiresAt.Equal(expires) {
		t.Fatal("the Secret does not hold the new secret with the old one as previous until the answered expiry")
	}

	// The grace period ends: the controller, woken by an edit, drops the old secret.
	f.skew.Store(int64(24*time.Hour + time.Minute))
	if r := f.do(t, "PATCH", "/api/webhooks/"+id, f.adv, `{"description": "after the grace"}`); r.status != 200 {
		t.Fatalf("patch = %d %s", r.status, r.raw)
	}
	testenv.Eventually(t, 15*time.Second, func() (bool, string) {
		k := f.signingSecret(t, id)
		return k.Previous == "" && k.Current == second, "the previous secret is still in the Secret after its grace period"
	})
	testenv.Eventually(t, 15*time.Second, func() (bool, string) {
		r := f.do(t, "GET", "/api/webhooks/"+id, f.adv, "")
		return r.status == 200 && decode[webhook](t, r).PreviousSecretExpiresAt == nil, "previous_secret_expires_at is still shown: " + r.raw
	})
}

func TestInvalidWebhooksAreRefusedWithTheReason(t *testing.T) {
	f := newWebhookFixture(t)
	id, _ := f.create(t, f.adv, orderHook)
	cases := []struct {
		name, method, path, body string
		code, field, message     string
	}{
		{"http to a public host", "POST", "/api/webhooks", `{"url": "http://receiver.example/h", "events": ["conversion.created"]}`,
			"validation_failed", "url", "url must use https:// (http:// is allowed only for localhost, 127.0.0.1 and [::1])"},
		{"no events", "POST", "/api/webhooks", `{"url": "https://receiver.example/h", "events": []}`,
			"validation_failed", "events", "at least one event is required"},
		{"an unknown event", "POST", "/api/webhooks", `{"url": "https://receiver.example/h", "events": ["order.shipped"]}`,
			"validation_failed", "events[0]", "Unsupported value"},
		{"a relative URL", "POST", "/api/webhooks", `{"url": "/h", "events": ["conversion.created"]}`,
			"validation_failed", "url", "url must be an absolute URL with a host"},
		{"a grace period that would overflow a duration", "POST", "/api/webhooks", `{"url": "https://receiver.example/h", "events": ["conversion.created"], "rotation_grace_period_seconds": 18446744074}`,
			"validation_failed", "rotation_grace_period_seconds", "between 0 and 604800"},
		{"a port beyond 65535", "POST", "/api/webhooks", `{"url": "http://127.0.0.1:99999/x", "events": ["conversion.created"]}`,
			"validation_failed", "url", "url must have a port from 1 to 65535"},
		{"a raw space in the URL", "POST", "/api/webhooks", `{"url": "https://receiver.example/a b", "events": ["conversion.created"]}`,
			"validation_failed", "url", "url must not contain spaces or control characters"},
		{"a control character in the description", "POST", "/api/webhooks", `{"url": "https://receiver.example/h", "events": ["conversion.created"], "description": "a\u001b[31mb"}`,
			"validation_failed", "description", "must not contain control characters"},
		{"a patch with a control character in the description", "PATCH", "/api/webhooks/" + id, `{"description": "x\u0007"}`,
			"validation_failed", "description", "must not contain control characters"},
		{"an unknown field", "POST", "/api/webhooks", `{"url": "https://receiver.example/h", "events": ["conversion.created"], "company_id": "co_x"}`,
			"invalid_json", "", "company_id"},
		{"a patch to a URL with credentials", "PATCH", "/api/webhooks/" + id, `{"url": "https://user:pw@receiver.example/"}`,
			"validation_failed", "url", "url must not contain credentials"},
		{"a patch to http on a public host", "PATCH", "/api/webhooks/" + id, `{"url": "http://receiver.example/h"}`,
			"validation_failed", "url", "url must use https://"},
		{"a patch to no events", "PATCH", "/api/webhooks/" + id, `{"events": []}`,
			"validation_failed", "events", "at least one event is required"},
		{"a rotation with a body", "PUT", "/api/webhooks/" + id + "/rotate-secret", `{"grace": "1h"}`,
			"invalid_json", "", "grace"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := f.do(t, c.method, c.path, f.adv, c.body)
			if r.status != 400 || r.problem.Code != c.code || !strings.Contains(r.raw, c.message) {
				t.Fatalf("= %d %s; want 400 %s with %q", r.status, r.raw, c.code, c.message)
			}
			if c.field == "" {
				return
			}
			for _, e := range r.problem.Errors {
				if e.Field == c.field && strings.Contains(e.Message, c.message) {
					return
				}
			}
			t.Fatalf("no error on field %q with %q: %s", c.field, c.message, r.raw)
		})
	}
	if ids := idsOf(t, f.do(t, "GET", "/api/webhooks", f.adv, "")); len(ids) != 1 {
		t.Fatalf("refused webhooks were created: %v", ids)
	}
}

// fakeWebhooks keeps webhooks in memory and can only list and create them: a route that
// reaches another method panics, which the server answers with a 500.
type fakeWebhooks struct {
	httpapi.WebhookService
	mu    sync.Mutex
	hooks []webhooks.Webhook
}

func (w *fakeWebhooks) List(_ context.Context, companyID string, _ page.Request) (page.List[webhooks.Webhook], error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := page.List[webhooks.Webhook]{Data: []webhooks.Webhook{}}
	for _, h := range w.hooks {
		if h.CompanyID == companyID {
			out.Data = append(out.Data, h)
		}
	}
	return out, nil
}

func (w *fakeWebhooks) Create(_ context.Context, companyID string, in webhooks.Input) (webhooks.Webhook, string, error) {
	h := webhooks.Webhook{ID: ids.New(ids.Webhook), CompanyID: companyID, URL: in.URL, Events: in.Events, Description: in.Description,
		RotationGracePeriodSeconds: 86400, Ready: true, CreatedAt: time.Now().UTC()}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.hooks = append(w.hooks, h)
	return h, signing.NewSecret(), nil
}

func TestMembersReadWebhooksButOnlyOwnersAndAdminsChangeThem(t *testing.T) {
	f := newFakeFixture(t)
	f.srv.MountWebhooks(&fakeWebhooks{})
	adv, member, aff := f.dashboardAs(identity.Advertiser, "owner"), f.dashboardAs(identity.Advertiser, "member"), f.dashboardAs(identity.Affiliate, "admin")
	create := func(who map[string]string) string {
		t.Helper()
		r := f.do(t, "POST", "/api/webhooks", who, orderHook)
		if r.status != 201 {
			t.Fatalf("create = %d %s", r.status, r.raw)
		}
		return decode[webhook](t, r).ID
	}
	id := create(adv)
	if ids := idsOf(t, f.do(t, "GET", "/api/webhooks", member, "")); !slices.Contains(ids, id) {
		t.Fatal("a member cannot list")
	}
	for _, c := range []struct{ method, path, body string }{
		{"POST", "/api/webhooks", orderHook},
		{"PATCH", "/api/webhooks/" + id, `{"suspended": true}`},
		{"PUT", "/api/webhooks/" + id + "/rotate-secret", ""},
		{"DELETE", "/api/webhooks/" + id, ""},
	} {
		if r := f.do(t, c.method, c.path, member, c.body); r.status != 403 || r.problem.Code != "forbidden" {
			t.Errorf("a member's %s %s = %d %s", c.method, c.path, r.status, r.raw)
		}
	}
	// An admin of the other company can create its own.
	if id := create(aff); id == "" {
		t.Fatal("an admin could not create")
	}
}

func TestThePublicAPIListsWebhooksReadOnly(t *testing.T) {
	f := newWebhookFixture(t)
	var made []string
	for range 3 {
		id, _ := f.create(t, f.adv, orderHook)
		made = append(made, id)
	}
	r := f.do(t, "GET", "/api/v1/webhooks?limit=2", f.advKey, "")
	page1 := idsOf(t, r)
	next := decode[list[resource]](t, r).NextCursor
	if len(page1) != 2 || page1[0] != made[2] || page1[1] != made[1] || next == "" || strings.Contains(r.raw, "whsec_") {
		t.Fatalf("first page = %s", r.raw)
	}
	page2 := idsOf(t, f.do(t, "GET", "/api/v1/webhooks?limit=2&cursor="+next, f.advKey, ""))
	if len(page2) != 1 || page2[0] != made[0] {
		t.Fatalf("second page = %v", page2)
	}
	if r := f.do(t, "POST", "/api/v1/webhooks", f.advKey, orderHook); r.status != 405 {
		t.Fatalf("POST /api/v1/webhooks = %d %s, want 405", r.status, r.raw)
	}
	if r := f.do(t, "GET", "/api/v1/webhooks", nil, ""); r.status != 401 {
		t.Fatalf("without a key = %d", r.status)
	}
	if ids := idsOf(t, f.do(t, "GET", "/api/v1/webhooks", f.affKey, "")); len(ids) != 0 {
		t.Fatalf("another company's key lists %v", ids)
	}
}

func TestACreateRetriedWithTheSameIdempotencyKeyMakesOneWebhook(t *testing.T) {
	f := newWebhookFixture(t)
	h := map[string]string{"Idempotency-Key": "create-orders-hook"}
	for k, v := range f.adv {
		h[k] = v
	}
	first := f.do(t, "POST", "/api/webhooks", h, orderHook)
	again := f.do(t, "POST", "/api/webhooks", h, orderHook)
	if first.status != 201 || again.status != 201 || again.header.Get("Idempotent-Replayed") != "true" || decode[webhook](t, first).ID != decode[webhook](t, again).ID {
		t.Fatalf("first %d %s, retry %d %s", first.status, first.raw, again.status, again.raw)
	}
	if ids := idsOf(t, f.do(t, "GET", "/api/webhooks", f.adv, "")); len(ids) != 1 {
		t.Fatalf("%d webhooks after a retried create", len(ids))
	}
}

func TestWithoutTheControllerACreateIsUndoneWith503(t *testing.T) {
	kube.Require(t)
	f := newBareFixture(t)
	ns := kube.Namespace(t) // no controller runs here
	f.srv.MountWebhooks(webhooks.NewService(kube.Client, webhooks.Options{Namespace: ns, Wait: 300 * time.Millisecond}))
	adv := f.dashboardAs(t, "advertiser", "owner")
	r := f.do(t, "POST", "/api/webhooks", adv, orderHook)
	if r.status != 503 || r.problem.Code != "webhook_controller_unavailable" || r.header.Get("Retry-After") != "5" || strings.Contains(r.raw, "whsec_") {
		t.Fatalf("create without a controller = %d retry-after=%q %s", r.status, r.header.Get("Retry-After"), r.raw)
	}
	var list v1alpha1.WebhookList
	if err := kube.Client.List(context.Background(), &list, client.InNamespace(ns)); err != nil || len(list.Items) != 0 {
		t.Fatalf("%d Webhooks left behind (%v)", len(list.Items), err)
	}
}
