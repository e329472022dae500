package controllers

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/partnerstream/partnerstream/api/v1alpha1"
	"github.com/partnerstream/partnerstream/internal/ids"
	"github.com/partnerstream/partnerstream/internal/webhooks/signing"
)

// Reasons of the conditions and of the Kubernetes events. A failed reconcile gives its reason
// to Ready, to Reconciling or Stalled, and to a Warning event alike.
const (
	ReasonSecretReady     = "SecretReady"
	ReasonSecretConflict  = "SecretConflict"
	ReasonReconcileFailed = "ReconcileFailed"

	EventSecretCreated   = "SecretCreated"
	EventSecretRotated   = "SecretRotated"
	EventSecretReplaced  = "SecretReplaced"
	EventPreviousExpired = "PreviousSecretExpired"
)

// Annotations on the signing Secret. The Secret, not the Webhook's status, is the record of
// the rotation: it is written in the same update as the keys, so a crash between that update
// and the status patch can neither lose a rotation nor repeat one.
const (
	secretAnnotationNonce     = v1alpha1.AnnotationRotateSecret
	secretAnnotationRotatedAt = "partnerstream.io/rotated-at"
)

// SecretType is the type of the signing Secrets.
const SecretType corev1.SecretType = "partnerstream.io/webhook-signing"

// WebhookReconciler keeps each Webhook's signing Secret: it creates it, rotates it when the
// partnerstream.io/rotate-secret annotation changes, drops the previous secret when its
// grace period ends, and reports all of it in the status.
type WebhookReconciler struct {
	client.Client
	// APIReader reads the signing Secret uncached: a rotation must never act on a stale
	// copy. Defaults to the manager's API reader.
	APIReader client.Reader
	Recorder  events.EventRecorder
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// +kubebuilder:rbac:groups=partnerstream.io,resources=webhooks,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=partnerstream.io,resources=webhooks/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=partnerstream.io,resources=webhooks/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get

// SetupWithManager registers the reconciler. Status-only updates of a Webhook do not
// trigger it (its own patches would); spec, label and annotation changes and any change of
// its Secret do.
func (r *WebhookReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.APIReader == nil {
		r.APIReader = mgr.GetAPIReader()
	}
	if r.Recorder == nil {
		r.Recorder = mgr.GetEventRecorder("partnerstream-controller")
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.Webhook{}, builder.WithPredicates(predicate.Or(
			predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}, predicate.LabelChangedPredicate{}))).
		Owns(&corev1.Secret{}).
		Named("webhook").
		Complete(r)
}

// Reconcile loads the Webhook, lets reconcile do the work and patches the status with the
// outcome (the conditions and observedGeneration) whenever it changed. A failure is also a
// Warning event, so `kubectl describe` and `kubectl events` show it.
func (r *WebhookReconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, retErr error) {
	obj := &v1alpha1.Webhook{}
	if err := r.Get(ctx, req.NamespacedName, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, r.deleteOrphanSecret(ctx, req.NamespacedName)
		}
		return ctrl.Result{}, err
	}
	if !obj.DeletionTimestamp.IsZero() {
		// The owner reference lets the garbage collector remove the Secret.
		return ctrl.Result{}, nil
	}

	oldStatus := *obj.Status.DeepCopy()
	defer func() {
		if apierrors.IsConflict(retErr) {
			return // raced with another writer: the retry decides, the status stays as it was
		}
		setConditions(obj, retErr)
		if retErr != nil {
			reason, _ := failure(retErr)
			r.Recorder.Eventf(obj, nil, corev1.EventTypeWarning, reason, "Reconcile", "%s", retErr.Error())
		}
		// Every reconcile that gets this far has acted on this generation, failed or not:
		// the conditions then say how it went.
		obj.Status.ObservedGeneration = obj.Generation
		if equality.Semantic.DeepEqual(oldStatus, obj.Status) {
			return
		}
		// The base differs from obj in the status only: reconcile may have patched labels.
		base := obj.DeepCopy()
		base.Status = oldStatus
		if err := r.Status().Patch(ctx, obj, client.MergeFrom(base)); err != nil && !apierrors.IsNotFound(err) {
			retErr = errors.Join(retErr, fmt.Errorf("patch status: %w", err))
		}
	}()
	return r.reconcile(ctx, obj)
}

// reconcile brings the signing Secret in line with the Webhook and records it in the status.
func (r *WebhookReconciler) reconcile(ctx context.Context, obj *v1alpha1.Webhook) (ctrl.Result, error) {
	if err := r.ensureLabels(ctx, obj); err != nil {
		return ctrl.Result{}, err
	}
	if err := r.clearSuspendedReason(ctx, obj); err != nil {
		return ctrl.Result{}, err
	}
	secret, keys, err := r.ensureSecret(ctx, obj)
	if err != nil {
		return ctrl.Result{}, err
	}

	now := r.now()
	grace := obj.Spec.GracePeriod()
	rotatedAt := parseTime(secret.Annotations[secretAnnotationRotatedAt])
	changed, rotated, expired := false, false, false

	if nonce := obj.Annotations[v1alpha1.AnnotationRotateSecret]; nonce != "" && nonce != secret.Annotations[secretAnnotationNonce] {
		keys = keys.Rotate(now, grace)
		rotatedAt = now
		secret.Annotations[secretAnnotationNonce] = nonce
		secret.Annotations[secretAnnotationRotatedAt] = now.UTC().Format(time.RFC3339)
		changed, rotated = true, true
	}
	if keys.Previous != "" {
		// A shorter grace period set after a rotation (a leak found later) shortens it.
		if limit := rotatedAt.Add(grace); !rotatedAt.IsZero() && limit.Before(keys.PreviousExpiresAt) {
			keys.PreviousExpiresAt = limit
			changed = true
		}
		if !keys.PreviousValid(now) {
			keys.Previous, keys.PreviousExpiresAt = "", time.Time{}
			changed, expired = true, !rotated
		}
	}
	if changed {
		secret.Data = keys.Data()
		if err := r.Update(ctx, secret); err != nil {
			return ctrl.Result{}, fmt.Errorf("update Secret %s: %w", secret.Name, err)
		}
	}
	if rotated {
		r.Recorder.Eventf(obj, secret, corev1.EventTypeNormal, EventSecretRotated, "RotateSecret",
			"Rotated the signing secret; %s", previousFate(keys))
	}
	if expired {
		r.Recorder.Eventf(obj, secret, corev1.EventTypeNormal, EventPreviousExpired, "ExpireSecret",
			"The previous signing secret expired and no longer signs")
	}

	obj.Status.SecretName = secret.Name
	obj.Status.LastRotationNonce = secret.Annotations[secretAnnotationNonce]
	obj.Status.LastRotationTime = metaTime(rotatedAt)
	obj.Status.PreviousSecretExpiresAt = metaTime(keys.PreviousExpiresAt)
	if keys.Previous != "" {
		return ctrl.Result{RequeueAfter: keys.PreviousExpiresAt.Sub(now)}, nil
	}
	return ctrl.Result{}, nil
}

// ensureLabels puts the company and the API id on a Webhook made without them (kubectl): the
// id comes from a wh-<suffix> name, or is a fresh one.
func (r *WebhookReconciler) ensureLabels(ctx context.Context, obj *v1alpha1.Webhook) error {
	id := obj.ID()
	if id == "" {
		if fromName, ok := v1alpha1.IDFromName(obj.Name); ok {
			id = fromName
		} else {
			id = ids.New(ids.Webhook)
		}
	}
	if obj.Labels[v1alpha1.LabelCompanyID] == obj.Spec.CompanyID && obj.Labels[v1alpha1.LabelWebhookID] == id {
		return nil
	}
	patch := client.MergeFrom(obj.DeepCopy())
	if obj.Labels == nil {
		obj.Labels = map[string]string{}
	}
	obj.Labels[v1alpha1.LabelCompanyID] = obj.Spec.CompanyID
	obj.Labels[v1alpha1.LabelWebhookID] = id
	status := obj.Status // Patch overwrites obj with the server's copy
	if err := r.Patch(ctx, obj, patch); err != nil {
		return fmt.Errorf("label webhook: %w", err)
	}
	obj.Status = status
	return nil
}

// clearSuspendedReason drops the delivery workers' reason for suspending a Webhook once it is
// resumed (by the API or kubectl), so a later suspension by hand is not taken for theirs.
func (r *WebhookReconciler) clearSuspendedReason(ctx context.Context, obj *v1alpha1.Webhook) error {
	if obj.Spec.Suspend || obj.Annotations[v1alpha1.AnnotationSuspendedReason] == "" {
		return nil
	}
	patch := client.MergeFrom(obj.DeepCopy())
	delete(obj.Annotations, v1alpha1.AnnotationSuspendedReason)
	status := obj.Status // Patch overwrites obj with the server's copy
	if err := r.Patch(ctx, obj, patch); err != nil {
		return fmt.Errorf("clear the suspended reason: %w", err)
	}
	obj.Status = status
	return nil
}

// ensureSecret returns the Webhook's signing Secret and its keys, creating the Secret, or
// replacing a stale or broken one, as needed.
func (r *WebhookReconciler) ensureSecret(ctx context.Context, obj *v1alpha1.Webhook) (*corev1.Secret, signing.Keys, error) {
	secret := &corev1.Secret{}
	key := types.NamespacedName{Namespace: obj.Namespace, Name: v1alpha1.SigningSecretName(obj.Name)}
	err := r.APIReader.Get(ctx, key, secret)
	if apierrors.IsNotFound(err) {
		return r.createSecret(ctx, obj, key)
	}
	if err != nil {
		return nil, signing.Keys{}, fmt.Errorf("get Secret %s: %w", key.Name, err)
	}
	if secret.Labels[v1alpha1.LabelManagedBy] != v1alpha1.ManagedByController {
		return nil, signing.Keys{}, &conditionError{reason: ReasonSecretConflict,
			err: fmt.Errorf("the Secret %s exists and is not managed by partnerstream; delete or rename it", key.Name)}
	}
	keys, kerr := signing.FromData(secret.Data)
	if metav1.IsControlledBy(secret, obj) && kerr == nil {
		if secret.Annotations == nil {
			secret.Annotations = map[string]string{}
		}
		return secret, keys, nil
	}

	// Ours, but left by a deleted Webhook of the same name, or edited into something unusable:
	// nothing can sign with it, so start over with a fresh secret.
	fresh := r.newSecret(obj, key)
	secret.Labels, secret.Annotations, secret.Data, secret.Type = fresh.Labels, fresh.Annotations, fresh.Data, fresh.Type
	secret.OwnerReferences = nil
	if err := controllerutil.SetControllerReference(obj, secret, r.Scheme()); err != nil {
		return nil, signing.Keys{}, err
	}
	if err := r.Update(ctx, secret); err != nil {
		return nil, signing.Keys{}, fmt.Errorf("replace Secret %s: %w", key.Name, err)
	}
	r.Recorder.Eventf(obj, secret, corev1.EventTypeWarning, EventSecretReplaced, "CreateSecret",
		"Replaced Secret %s, which was stale or invalid, with a new signing secret", key.Name)
	keys, _ = signing.FromData(secret.Data)
	return secret, keys, nil
}

func (r *WebhookReconciler) createSecret(ctx context.Context, obj *v1alpha1.Webhook, key types.NamespacedName) (*corev1.Secret, signing.Keys, error) {
	secret := r.newSecret(obj, key)
	if err := controllerutil.SetControllerReference(obj, secret, r.Scheme()); err != nil {
		return nil, signing.Keys{}, err
	}
	if err := r.Create(ctx, secret); err != nil {
		return nil, signing.Keys{}, fmt.Errorf("create Secret %s: %w", key.Name, err)
	}
	r.Recorder.Eventf(obj, secret, corev1.EventTypeNormal, EventSecretCreated, "CreateSecret",
		"Created the signing secret in Secret %s", key.Name)
	keys, _ := signing.FromData(secret.Data)
	return secret, keys, nil
}

func (r *WebhookReconciler) newSecret(obj *v1alpha1.Webhook, key types.NamespacedName) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name: key.Name, Namespace: key.Namespace,
			Labels: map[string]string{
				v1alpha1.LabelManagedBy: v1alpha1.ManagedByController,
				v1alpha1.LabelCompanyID: obj.Spec.CompanyID,
				v1alpha1.LabelWebhookID: obj.ID(),
			},
			Annotations: map[string]string{},
		},
		Type: SecretType,
		Data: signing.Keys{Current: signing.NewSecret()}.Data(),
	}
}

// deleteOrphanSecret removes the Secret of a deleted Webhook. The garbage collector does it
// through the owner reference in a cluster; a bare control plane (make run, envtest) has
// none. The preconditions keep it from deleting a Secret a new namesake just took over.
func (r *WebhookReconciler) deleteOrphanSecret(ctx context.Context, webhook types.NamespacedName) error {
	if err := r.APIReader.Get(ctx, webhook, &v1alpha1.Webhook{}); !apierrors.IsNotFound(err) {
		return err // recreated (or the cache lagged): nothing is orphaned
	}
	secret := &corev1.Secret{}
	err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: webhook.Namespace, Name: v1alpha1.SigningSecretName(webhook.Name)}, secret)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get orphan Secret: %w", err)
	}
	owner := metav1.GetControllerOf(secret)
	if secret.Labels[v1alpha1.LabelManagedBy] != v1alpha1.ManagedByController || owner == nil ||
		owner.Kind != "Webhook" || owner.Name != webhook.Name {
		return nil
	}
	err = r.Delete(ctx, secret, client.Preconditions{UID: &secret.UID, ResourceVersion: &secret.ResourceVersion})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("delete orphan Secret %s: %w", secret.Name, err)
	}
	return nil
}

func (r *WebhookReconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// conditionError is a failure that retrying alone cannot fix (Stalled), with its own reason.
// The controller still retries it with back-off, so it recovers once someone fixes the cause.
type conditionError struct {
	reason string
	err    error
}

func (e *conditionError) Error() string { return e.err.Error() }
func (e *conditionError) Unwrap() error { return e.err }

// failure returns the reason of a failed reconcile and whether it is stalled.
func failure(err error) (reason string, stalled bool) {
	var ce *conditionError
	if errors.As(err, &ce) {
		return ce.reason, true
	}
	return ReasonReconcileFailed, false
}

// setConditions records the outcome of a reconcile the way kstatus reads it (Flux's
// conventions): Ready alone on success; on failure Ready=False beside Reconciling=True for a
// failure expected to pass, or Stalled=True for one that needs someone to act.
func setConditions(obj *v1alpha1.Webhook, err error) {
	set := func(typ string, status metav1.ConditionStatus, reason, message string) {
		apimeta.SetStatusCondition(&obj.Status.Conditions, metav1.Condition{Type: typ, Status: status,
			Reason: reason, Message: message, ObservedGeneration: obj.Generation})
	}
	// Delivering says why the delivery workers suspended the Webhook, while they do.
	if reason, message, ok := strings.Cut(obj.Annotations[v1alpha1.AnnotationSuspendedReason], ": "); ok && obj.Spec.Suspend {
		set(v1alpha1.ConditionDelivering, metav1.ConditionFalse, reason, message)
	} else {
		apimeta.RemoveStatusCondition(&obj.Status.Conditions, v1alpha1.ConditionDelivering)
	}
	if err == nil {
		message := "Signing secret published in Secret " + obj.Status.SecretName
		if obj.Spec.Suspend {
			message += "; deliveries are suspended"
		}
		set(v1alpha1.ConditionReady, metav1.ConditionTrue, ReasonSecretReady, message)
		apimeta.RemoveStatusCondition(&obj.Status.Conditions, v1alpha1.ConditionReconciling)
		apimeta.RemoveStatusCondition(&obj.Status.Conditions, v1alpha1.ConditionStalled)
		return
	}
	reason, stalled := failure(err)
	set(v1alpha1.ConditionReady, metav1.ConditionFalse, reason, err.Error())
	failing, other := v1alpha1.ConditionReconciling, v1alpha1.ConditionStalled
	if stalled {
		failing, other = other, failing
	}
	set(failing, metav1.ConditionTrue, reason, err.Error())
	apimeta.RemoveStatusCondition(&obj.Status.Conditions, other)
}

func previousFate(k signing.Keys) string {
	if k.Previous == "" {
		return "the previous one was revoked at once (grace period 0)"
	}
	return "the previous one signs until " + k.PreviousExpiresAt.UTC().Format(time.RFC3339)
}

func parseTime(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}
	}
	return t
}

func metaTime(t time.Time) *metav1.Time {
	if t.IsZero() {
		return nil
	}
	return &metav1.Time{Time: t.UTC().Truncate(time.Second)}
}
