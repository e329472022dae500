package controllers

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/partnerstream/partnerstream/internal/testenv"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/partnerstream/partnerstream/api/v1alpha1"
	"github.com/partnerstream/partnerstream/internal/ids"
	"github.com/partnerstream/partnerstream/internal/webhooks/kubetest"
	"github.com/partnerstream/partnerstream/internal/webhooks/signing"
)

var env *kubetest.Env

func TestMain(m *testing.M) { os.Exit(kubetest.Run(m, &env)) }

const waitFor = 15 * time.Second

// startController runs the reconciler, with the real clock, on a namespace of the test's own.
func startController(t *testing.T) string {
	t.Helper()
	env.Require(t)
	ns := env.Namespace(t)
	env.StartManager(t, ns, func(mgr ctrl.Manager) error {
		return (&WebhookReconciler{Client: mgr.GetClient()}).SetupWithManager(mgr)
	})
	return ns
}

func newWebhook(ns, name string) *v1alpha1.Webhook {
	return &v1alpha1.Webhook{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1alpha1.WebhookSpec{
			CompanyID: ids.New(ids.Company),
			URL:       "https://receiver.example/hooks",
			Events:    []v1alpha1.EventType{v1alpha1.EventConversionCreated},
		},
	}
}

func create(t *testing.T, obj client.Object) {
	t.Helper()
	if err := env.Client.Create(context.Background(), obj); err != nil {
		t.Fatalf("create %s: %v", obj.GetName(), err)
	}
}

// waitReady waits until the controller reports the current generation Ready and returns the
// Webhook and its signing Secret.
func waitReady(t *testing.T, key types.NamespacedName) (*v1alpha1.Webhook, *corev1.Secret) {
	t.Helper()
	wh, secret := &v1alpha1.Webhook{}, &corev1.Secret{}
	testenv.Eventually(t, waitFor, func() (bool, string) {
		if err := env.Client.Get(context.Background(), key, wh); err != nil {
			return false, err.Error()
		}
		ready := apimeta.FindStatusCondition(wh.Status.Conditions, v1alpha1.ConditionReady)
		if ready == nil || ready.Status != metav1.ConditionTrue || wh.Status.ObservedGeneration != wh.Generation {
			return false, fmt.Sprintf("status %+v", wh.Status)
		}
		err := env.Client.Get(context.Background(), types.NamespacedName{Namespace: key.Namespace, Name: wh.Status.SecretName}, secret)
		return err == nil, fmt.Sprint("secret: ", err)
	})
	return wh, secret
}

func TestCreateMakesSecretAndReady(t *testing.T) {
	ns := startController(t)
	id := ids.New(ids.Webhook)
	wh := newWebhook(ns, v1alpha1.ObjectName(id))
	create(t, wh)

	got, secret := waitReady(t, client.ObjectKeyFromObject(wh))

	if got.Status.SecretName != v1alpha1.SigningSecretName(wh.Name) {
		t.Errorf("status.secretName = %q", got.Status.SecretName)
	}
	if got.ID() != id || got.Labels[v1alpha1.LabelCompanyID] != wh.Spec.CompanyID {
		t.Errorf("labels = %v, want the id %s (from the name) and the company", got.Labels, id)
	}
	ready := apimeta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionReady)
	if ready.ObservedGeneration != got.Generation || ready.Reason != ReasonSecretReady {
		t.Errorf("Ready = %+v", ready)
	}
	if got.Spec.GracePeriod() != 24*time.Hour {
		t.Errorf("rotationGracePeriod defaulted to %v, want 24h", got.Spec.RotationGracePeriod)
	}

	keys, err := signing.FromData(secret.Data)
	if err != nil {
		t.Fatalf("secret data: %v", err)
	}
	if key, err := signing.Key(keys.Current); err != nil || len(key) != 32 {
		t.Errorf("current key: %d bytes, %v", len(key), err)
	}
	if keys.Previous != "" || len(secret.Data) != 1 {
		t.Errorf("a new Secret holds only the current secret, has keys %d", len(secret.Data))
	}
	if !metav1.IsControlledBy(secret, got) || !*metav1.GetControllerOf(secret).BlockOwnerDeletion {
		t.Errorf("owner references = %+v, want the Webhook as controller (garbage collection)", secret.OwnerReferences)
	}
	if secret.Type != SecretType || secret.Labels[v1alpha1.LabelWebhookID] != id || secret.Labels[v1alpha1.LabelManagedBy] != v1alpha1.ManagedByController {
		t.Errorf("secret type %q labels %v", secret.Type, secret.Labels)
	}
	waitEvent(t, got, corev1.EventTypeNormal, EventSecretCreated)
}

func TestFreelyNamedWebhookGetsAnID(t *testing.T) {
	ns := startController(t)
	wh := newWebhook(ns, "orders-to-crm")
	create(t, wh)
	got, _ := waitReady(t, client.ObjectKeyFromObject(wh))
	if !ids.Valid(ids.Webhook, got.ID()) {
		t.Errorf("webhook-id label = %q, want a fresh wh_ id", got.ID())
	}
}

func TestUpdateAdvancesObservedGeneration(t *testing.T) {
	ns := startController(t)
	wh := newWebhook(ns, "update-me")
	create(t, wh)
	got, secret := waitReady(t, client.ObjectKeyFromObject(wh))

	// A patch, not an update: the controller may still be writing the object's status or
	// labels, which would make an update with this resourceVersion conflict.
	patch := client.MergeFrom(got.DeepCopy())
	got.Spec.Description = "orders to the CRM"
	got.Spec.Events = append(got.Spec.Events, v1alpha1.EventConversionApproved)
	if err := env.Client.Patch(context.Background(), got, patch); err != nil {
		t.Fatal(err)
	}
	if got.Generation != 2 {
		t.Fatalf("generation = %d after a spec change, want 2", got.Generation)
	}
	updated, secretAfter := waitReady(t, client.ObjectKeyFromObject(wh))
	if updated.Status.ObservedGeneration != 2 {
		t.Errorf("observedGeneration = %d, want 2", updated.Status.ObservedGeneration)
	}
	if string(secretAfter.Data[v1alpha1.SecretKeyCurrent]) != string(secret.Data[v1alpha1.SecretKeyCurrent]) {
		t.Error("a spec change replaced the signing secret")
	}
}

func TestRotationThroughTheController(t *testing.T) {
	ns := startController(t)
	wh := newWebhook(ns, "rotate-me")
	create(t, wh)
	got, secret := waitReady(t, client.ObjectKeyFromObject(wh))
	old := string(secret.Data[v1alpha1.SecretKeyCurrent])

	patch := client.MergeFrom(got.DeepCopy())
	got.Annotations = map[string]string{v1alpha1.AnnotationRotateSecret: "n1"}
	if err := env.Client.Patch(context.Background(), got, patch); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, waitFor, func() (bool, string) {
		_ = env.Client.Get(context.Background(), client.ObjectKeyFromObject(wh), got)
		return got.Status.LastRotationNonce == "n1", fmt.Sprintf("status %+v", got.Status)
	})
	// The status is patched after the Secret: once the nonce shows, the new secret is there.
	if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(secret), secret); err != nil {
		t.Fatal(err)
	}
	keys, _ := signing.FromData(secret.Data)
	if keys.Current == old || keys.Previous != old {
		t.Errorf("after rotation current changed=%v, previous is the old one=%v", keys.Current != old, keys.Previous == old)
	}
	if got.Status.PreviousSecretExpiresAt == nil || got.Status.LastRotationTime == nil {
		t.Errorf("rotation times missing from status: %+v", got.Status)
	}
	waitEvent(t, got, corev1.EventTypeNormal, EventSecretRotated)
}

func TestDeletionRemovesSecret(t *testing.T) {
	ns := startController(t)
	wh := newWebhook(ns, "delete-me")
	create(t, wh)
	_, secret := waitReady(t, client.ObjectKeyFromObject(wh))

	if err := env.Client.Delete(context.Background(), wh); err != nil {
		t.Fatal(err)
	}
	// A cluster's garbage collector follows the owner reference; envtest has none, so this
	// also shows the controller's own clean-up of an orphan.
	testenv.Eventually(t, waitFor, func() (bool, string) {
		err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(secret), &corev1.Secret{})
		return apierrors.IsNotFound(err), fmt.Sprint("secret still there: ", err)
	})
}

func TestStaleSecretOfANamesakeIsReplaced(t *testing.T) {
	ns := startController(t)
	wh := newWebhook(ns, "namesake")
	stale := (&WebhookReconciler{}).newSecret(wh, types.NamespacedName{Namespace: ns, Name: v1alpha1.SigningSecretName(wh.Name)})
	stale.OwnerReferences = []metav1.OwnerReference{{APIVersion: v1alpha1.GroupVersion.String(), Kind: "Webhook",
		Name: wh.Name, UID: "0d6c1f0e-dead-4bee-8f00-000000000000", Controller: new(true)}}
	staleValue := string(stale.Data[v1alpha1.SecretKeyCurrent])
	create(t, stale)

	create(t, wh)
	got, secret := waitReady(t, client.ObjectKeyFromObject(wh))
	if !metav1.IsControlledBy(secret, got) || string(secret.Data[v1alpha1.SecretKeyCurrent]) == staleValue {
		t.Errorf("the stale Secret of a deleted namesake was kept")
	}
}

func TestForeignSecretIsAConflict(t *testing.T) {
	ns := startController(t)
	wh := newWebhook(ns, "conflict")
	create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: v1alpha1.SigningSecretName(wh.Name)},
		StringData: map[string]string{"password": "not ours"}})
	create(t, wh)
	// Stalled, not Reconciling: retrying alone cannot fix it, so kstatus reports it Failed.
	const want = "Ready=False/SecretConflict Stalled=True/SecretConflict"
	testenv.Eventually(t, waitFor, func() (bool, string) {
		_ = env.Client.Get(context.Background(), client.ObjectKeyFromObject(wh), wh)
		return conditions(wh) == want && wh.Status.ObservedGeneration == wh.Generation,
			fmt.Sprintf("conditions %s, want %s; observedGeneration %d", conditions(wh), want, wh.Status.ObservedGeneration)
	})
	waitEvent(t, wh, corev1.EventTypeWarning, ReasonSecretConflict)
	secret := &corev1.Secret{}
	_ = env.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: v1alpha1.SigningSecretName(wh.Name)}, secret)
	if string(secret.Data["password"]) != "not ours" {
		t.Error("the controller overwrote a Secret it does not manage")
	}
}

func waitEvent(t *testing.T, obj *v1alpha1.Webhook, eventType, reason string) {
	t.Helper()
	testenv.Eventually(t, waitFor, func() (bool, string) {
		var list eventsv1.EventList
		if err := env.Client.List(context.Background(), &list, client.InNamespace(obj.Namespace)); err != nil {
			return false, err.Error()
		}
		var seen []string
		for _, e := range list.Items {
			if e.Regarding.UID == obj.UID && e.Type == eventType && e.Reason == reason {
				return true, ""
			}
			seen = append(seen, e.Type+" "+e.Reason)
		}
		return false, fmt.Sprintf("no %s %s event; saw %v", eventType, reason, seen)
	})
}

// conditions sums up the Webhook's conditions as "Type=Status/Reason", sorted by type.
func conditions(wh *v1alpha1.Webhook) string {
	var out []string
	for _, c := range wh.Status.Conditions {
		out = append(out, fmt.Sprintf("%s=%s/%s", c.Type, c.Status, c.Reason))
	}
	slices.Sort(out)
	return strings.Join(out, " ")
}

// direct drives the reconciler by hand, without a manager, on the test's own namespace.
type direct struct {
	t      *testing.T
	r      *WebhookReconciler
	clock  *testenv.Clock
	events *events.FakeRecorder
	key    types.NamespacedName
}

func newDirect(t *testing.T, grace string) *direct {
	env.Require(t)
	ns := env.Namespace(t)
	d := &direct{t: t, clock: testenv.NewClock(), events: events.NewFakeRecorder(100)}
	d.r = &WebhookReconciler{Client: env.Client, APIReader: env.Client, Recorder: d.events, Now: d.clock.Now}
	wh := newWebhook(ns, "direct")
	if grace != "" {
		d, err := time.ParseDuration(grace)
		if err != nil {
			t.Fatal(err)
		}
		wh.Spec.RotationGracePeriod = &metav1.Duration{Duration: d}
	}
	create(t, wh)
	d.key = client.ObjectKeyFromObject(wh)
	return d
}

func (d *direct) reconcile() ctrl.Result {
	d.t.Helper()
	res, err := d.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: d.key})
	if err != nil {
		d.t.Fatalf("reconcile: %v", err)
	}
	return res
}

// reconcileFailing runs a reconcile that must fail and returns the Webhook it left.
func (d *direct) reconcileFailing() *v1alpha1.Webhook {
	d.t.Helper()
	if _, err := d.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: d.key}); err == nil {
		d.t.Fatal("reconcile succeeded, want a failure")
	}
	return d.webhook()
}

func (d *direct) webhook() *v1alpha1.Webhook {
	d.t.Helper()
	wh := &v1alpha1.Webhook{}
	if err := env.Client.Get(context.Background(), d.key, wh); err != nil {
		d.t.Fatal(err)
	}
	return wh
}

func (d *direct) keys() (signing.Keys, *v1alpha1.Webhook) {
	d.t.Helper()
	wh, secret := &v1alpha1.Webhook{}, &corev1.Secret{}
	if err := env.Client.Get(context.Background(), d.key, wh); err != nil {
		d.t.Fatal(err)
	}
	if err := env.Client.Get(context.Background(), types.NamespacedName{Namespace: d.key.Namespace, Name: wh.Status.SecretName}, secret); err != nil {
		d.t.Fatal(err)
	}
	k, err := signing.FromData(secret.Data)
	if err != nil {
		d.t.Fatal(err)
	}
	return k, wh
}

func (d *direct) requestRotation(nonce string) {
	d.t.Helper()
	patch := []byte(fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, v1alpha1.AnnotationRotateSecret, nonce))
	wh := &v1alpha1.Webhook{ObjectMeta: metav1.ObjectMeta{Namespace: d.key.Namespace, Name: d.key.Name}}
	if err := env.Client.Patch(context.Background(), wh, client.RawPatch(types.MergePatchType, patch)); err != nil {
		d.t.Fatal(err)
	}
}

func (d *direct) setGrace(grace time.Duration) {
	d.t.Helper()
	patch := []byte(fmt.Sprintf(`{"spec":{"rotationGracePeriod":%q}}`, grace.String()))
	wh := &v1alpha1.Webhook{ObjectMeta: metav1.ObjectMeta{Namespace: d.key.Namespace, Name: d.key.Name}}
	if err := env.Client.Patch(context.Background(), wh, client.RawPatch(types.MergePatchType, patch)); err != nil {
		d.t.Fatal(err)
	}
}

// sawEvent reports whether an event of the type and reason was recorded since the last look.
func (d *direct) sawEvent(eventType, reason string) bool {
	for {
		select {
		case e := <-d.events.Events:
			if strings.HasPrefix(e, eventType+" "+reason+" ") {
				return true
			}
		default:
			return false
		}
	}
}

// unreachable is an API reader that fails like an API server that is briefly out of reach.
type unreachable struct{ client.Reader }

func (unreachable) Get(context.Context, client.ObjectKey, client.Object, ...client.GetOption) error {
	return errors.New("dial tcp 127.0.0.1:6443: connect: connection refused")
}

func TestTransientFailureIsReconcilingWithAWarning(t *testing.T) {
	d := newDirect(t, "")
	d.r.APIReader = unreachable{}
	wh := d.reconcileFailing()
	if got, want := conditions(wh), "Ready=False/ReconcileFailed Reconciling=True/ReconcileFailed"; got != want {
		t.Errorf("conditions %s, want %s", got, want)
	}
	if wh.Status.ObservedGeneration != wh.Generation {
		t.Errorf("observedGeneration %d of generation %d: a failed reconcile observed it too", wh.Status.ObservedGeneration, wh.Generation)
	}
	if !d.sawEvent(corev1.EventTypeWarning, ReasonReconcileFailed) {
		t.Error("no ReconcileFailed warning event")
	}

	d.r.APIReader = env.Client
	d.reconcile()
	if got, want := conditions(d.webhook()), "Ready=True/SecretReady"; got != want {
		t.Errorf("after recovery conditions %s, want %s", got, want)
	}
	if d.sawEvent(corev1.EventTypeWarning, ReasonReconcileFailed) {
		t.Error("a successful reconcile emitted a warning")
	}
}

func TestConflictIsStalledUntilTheForeignSecretGoes(t *testing.T) {
	d := newDirect(t, "")
	foreign := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: d.key.Namespace, Name: v1alpha1.SigningSecretName(d.key.Name)},
		StringData: map[string]string{"password": "not ours"}}
	create(t, foreign)
	wh := d.reconcileFailing()
	if got, want := conditions(wh), "Ready=False/SecretConflict Stalled=True/SecretConflict"; got != want {
		t.Errorf("conditions %s, want %s", got, want)
	}
	if !d.sawEvent(corev1.EventTypeWarning, ReasonSecretConflict) {
		t.Error("no SecretConflict warning event")
	}

	if err := env.Client.Delete(context.Background(), foreign); err != nil {
		t.Fatal(err)
	}
	d.reconcile()
	if got, want := conditions(d.webhook()), "Ready=True/SecretReady"; got != want {
		t.Errorf("after the foreign Secret went, conditions %s, want %s", got, want)
	}
}

func TestRotationOverlapAndExpiry(t *testing.T) {
	d := newDirect(t, "1h")
	if res := d.reconcile(); res.RequeueAfter != 0 {
		t.Errorf("without a previous secret nothing is scheduled, got RequeueAfter %v", res.RequeueAfter)
	}
	first, _ := d.keys()

	d.clock.Advance(10 * time.Minute)
	rotatedAt := d.clock.Now()
	d.requestRotation("n1")
	res := d.reconcile()
	keys, wh := d.keys()
	if keys.Current == first.Current || keys.Previous != first.Current {
		t.Fatal("rotation did not make a new current secret with the old one as previous")
	}
	if want := rotatedAt.Add(time.Hour); !keys.PreviousExpiresAt.Equal(want) || res.RequeueAfter != time.Hour {
		t.Errorf("previous expires %v (want %v), RequeueAfter %v (want 1h)", keys.PreviousExpiresAt, want, res.RequeueAfter)
	}
	if wh.Status.LastRotationNonce != "n1" || !wh.Status.LastRotationTime.Time.Equal(rotatedAt) ||
		!wh.Status.PreviousSecretExpiresAt.Time.Equal(rotatedAt.Add(time.Hour)) {
		t.Errorf("status = %+v", wh.Status)
	}
	if !d.sawEvent(corev1.EventTypeNormal, EventSecretRotated) {
		t.Error("no SecretRotated event")
	}

	// The same nonce again, or any other reconcile, rotates nothing: during the whole grace
	// period both secrets sign.
	d.clock.Advance(59 * time.Minute)
	res = d.reconcile()
	again, _ := d.keys()
	if again != keys {
		t.Error("a second reconcile of the same request rotated again")
	}
	if res.RequeueAfter != time.Minute {
		t.Errorf("RequeueAfter = %v, want the 1m left of the grace period", res.RequeueAfter)
	}

	d.clock.Advance(time.Minute)
	if res := d.reconcile(); res.RequeueAfter != 0 {
		t.Errorf("RequeueAfter = %v after expiry", res.RequeueAfter)
	}
	expired, wh := d.keys()
	if expired.Previous != "" || expired.Current != keys.Current || wh.Status.PreviousSecretExpiresAt != nil {
		t.Errorf("at expiry the previous secret must go and the current stay: previous kept=%v, status %+v", expired.Previous != "", wh.Status)
	}
	if !d.sawEvent(corev1.EventTypeNormal, EventPreviousExpired) {
		t.Error("no PreviousSecretExpired event")
	}
}

func TestRotationWithZeroGraceRevokesAtOnce(t *testing.T) {
	d := newDirect(t, "0s")
	d.reconcile()
	first, _ := d.keys()
	d.requestRotation("leak")
	if res := d.reconcile(); res.RequeueAfter != 0 {
		t.Errorf("RequeueAfter = %v", res.RequeueAfter)
	}
	keys, wh := d.keys()
	if keys.Current == first.Current || keys.Previous != "" || wh.Status.PreviousSecretExpiresAt != nil {
		t.Error("a rotation with grace 0 must drop the old secret at once")
	}
}

func TestShorterGraceAfterRotationShortensIt(t *testing.T) {
	d := newDirect(t, "24h")
	d.reconcile()
	d.requestRotation("n1")
	d.reconcile()
	rotatedAt := d.clock.Now()

	d.clock.Advance(time.Hour)
	d.setGrace(3 * time.Hour)
	res := d.reconcile()
	keys, _ := d.keys()
	if !keys.PreviousExpiresAt.Equal(rotatedAt.Add(3*time.Hour)) || res.RequeueAfter != 2*time.Hour {
		t.Errorf("previous expires %v, RequeueAfter %v; want rotation+3h and 2h", keys.PreviousExpiresAt, res.RequeueAfter)
	}
	d.setGrace(0)
	d.reconcile()
	if keys, _ := d.keys(); keys.Previous != "" {
		t.Error("setting the grace period to 0 after a rotation must revoke the previous secret")
	}
}

func TestRotationIsRecordedInTheSecret(t *testing.T) {
	// A crash after the Secret update but before the status patch must not rotate twice
	// (that would drop the secret receivers still use): the Secret records the nonce.
	d := newDirect(t, "1h")
	d.reconcile()
	d.requestRotation("n1")
	d.reconcile()
	keys, wh := d.keys()

	lost := client.MergeFrom(wh.DeepCopy())
	wh.Status.LastRotationNonce = ""
	if err := env.Client.Status().Patch(context.Background(), wh, lost); err != nil {
		t.Fatal(err)
	}
	d.reconcile()
	again, wh := d.keys()
	if again != keys || wh.Status.LastRotationNonce != "n1" {
		t.Errorf("the status was rebuilt from the Secret: same keys=%v, nonce %q", again == keys, wh.Status.LastRotationNonce)
	}
}

func TestBrokenSecretIsReplaced(t *testing.T) {
	d := newDirect(t, "")
	d.reconcile()
	_, wh := d.keys()
	secret := &corev1.Secret{}
	_ = env.Client.Get(context.Background(), types.NamespacedName{Namespace: d.key.Namespace, Name: wh.Status.SecretName}, secret)
	secret.Data = map[string][]byte{v1alpha1.SecretKeyCurrent: []byte("hunter2")}
	if err := env.Client.Update(context.Background(), secret); err != nil {
		t.Fatal(err)
	}
	d.reconcile()
	if keys, _ := d.keys(); keys.Current == "hunter2" {
		t.Error("an unusable secret was kept")
	}
	if !d.sawEvent(corev1.EventTypeWarning, EventSecretReplaced) {
		t.Error("no SecretReplaced warning")
	}
}

func TestASuspensionByTheDeliveryWorkersShowsInDeliveringUntilResumed(t *testing.T) {
	ns := startController(t)
	wh := newWebhook(ns, v1alpha1.ObjectName(ids.New(ids.Webhook)))
	create(t, wh)
	got, _ := waitReady(t, client.ObjectKeyFromObject(wh))
	if c := apimeta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionDelivering); c != nil {
		t.Fatalf("a new Webhook has Delivering %+v, want none", c)
	}
	// The delivery workers suspend it, as their KubeSuspender does.
	patch := client.MergeFrom(got.DeepCopy())
	got.Spec.Suspend = true
	got.Annotations = map[string]string{v1alpha1.AnnotationSuspendedReason: "ReceiverDead: no successful delivery since 2026-03-01T12:00:00Z"}
	if err := env.Client.Patch(context.Background(), got, patch); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, waitFor, func() (bool, string) {
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(wh), got); err != nil {
			return false, err.Error()
		}
		c := apimeta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionDelivering)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == "ReceiverDead" &&
			c.Message == "no successful delivery since 2026-03-01T12:00:00Z" && c.ObservedGeneration == got.Generation, fmt.Sprintf("conditions %+v", got.Status.Conditions)
	})
	// Resumed (kubectl or the API): the condition and the reason go.
	patch = client.MergeFrom(got.DeepCopy())
	got.Spec.Suspend = false
	if err := env.Client.Patch(context.Background(), got, patch); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, waitFor, func() (bool, string) {
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(wh), got); err != nil {
			return false, err.Error()
		}
		c := apimeta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionDelivering)
		_, annotated := got.Annotations[v1alpha1.AnnotationSuspendedReason]
		return c == nil && !annotated, fmt.Sprintf("conditions %+v, annotations %v", got.Status.Conditions, got.Annotations)
	})
}
