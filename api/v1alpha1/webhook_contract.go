package v1alpha1

import (
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"

	"github.com/partnerstream/partnerstream/internal/ids"
)

// The names shared by the controller, the dashboard API and the delivery workers. They are
// part of the resource's contract (docs/webhooks.md): changing one breaks running objects.
const (
	// LabelCompanyID carries spec.companyID on Webhooks and their Secrets, for `kubectl -l`.
	// The API scopes by the field selector on spec.companyID, which cannot be edited.
	LabelCompanyID = "partnerstream.io/company-id"
	// LabelWebhookID carries the API id (wh_...) of a Webhook and of its Secret.
	LabelWebhookID = "partnerstream.io/webhook-id"
	// LabelManagedBy marks the Secrets the controller owns.
	LabelManagedBy = "app.kubernetes.io/managed-by"
	// ManagedByController is LabelManagedBy's value on the controller's Secrets.
	ManagedByController = "partnerstream-controller"

	// AnnotationSuspendedReason is set by the delivery workers when they suspend a Webhook:
	// "<Reason>: <message>", Reason ReceiverGone (it answered 410) or ReceiverDead (no
	// successful delivery for days). The controller shows it in the Delivering condition and
	// removes it once the Webhook is resumed.
	AnnotationSuspendedReason = "partnerstream.io/suspended-reason"

	// AnnotationRotateSecret requests a rotation of the signing secret: any value other than
	// status.lastRotationNonce triggers exactly one.
	AnnotationRotateSecret = "partnerstream.io/rotate-secret"

	// FieldCompanyID is the selectable field of spec.companyID (server-side filtering).
	FieldCompanyID = "spec.companyID"

	// SecretKeyCurrent is the Secret key of the primary signing secret (whsec_...).
	SecretKeyCurrent = "current"
	// SecretKeyPrevious is the Secret key of the secret replaced by the last rotation,
	// present only during its grace period.
	SecretKeyPrevious = "previous"
	// SecretKeyPreviousExpiresAt is when the previous secret stops signing (RFC 3339).
	SecretKeyPreviousExpiresAt = "previous-expires-at"

	// ConditionReady is the condition type of a Webhook whose signing secret is published.
	ConditionReady = "Ready"
	// ConditionReconciling is True while the last reconcile failed for a reason expected to
	// pass (the controller retries); kstatus reads it as InProgress.
	ConditionReconciling = "Reconciling"
	// ConditionStalled is True while the controller cannot progress without someone changing
	// something (a foreign Secret in the way); kstatus reads it as Failed.
	ConditionStalled = "Stalled"
	// ConditionDelivering is False while the delivery workers keep the Webhook suspended
	// (AnnotationSuspendedReason); absent otherwise.
	ConditionDelivering = "Delivering"

	// idPrefix and namePrefix map the API id wh_<suffix> to the object name wh-<suffix>
	// (an underscore is not allowed in a name; the lowercase base32 suffix is).
	idPrefix   = ids.Webhook + "_"
	namePrefix = ids.Webhook + "-"
)

// DefaultRotationGracePeriod applies when spec.rotationGracePeriod is unset (the API server
// defaults the field to it as well).
const DefaultRotationGracePeriod = 24 * time.Hour

// GracePeriod is how long the previous secret keeps signing after a rotation.
func (s *WebhookSpec) GracePeriod() time.Duration {
	if s.RotationGracePeriod == nil {
		return DefaultRotationGracePeriod
	}
	return max(s.RotationGracePeriod.Duration, 0)
}

// ObjectName returns the object name of a Webhook the API creates for the id wh_<suffix>.
func ObjectName(id string) string {
	return namePrefix + strings.TrimPrefix(id, idPrefix)
}

// IDFromName returns the API id of an object named wh-<suffix>, and false for any other name
// (a Webhook named freely by an admin gets an id from the controller instead).
func IDFromName(name string) (string, bool) {
	suffix, ok := strings.CutPrefix(name, namePrefix)
	if !ok || !ids.Valid(ids.Webhook, idPrefix+suffix) {
		return "", false
	}
	return idPrefix + suffix, true
}

// ID returns the webhook's API id (its LabelWebhookID label), empty until assigned.
func (w *Webhook) ID() string { return w.Labels[LabelWebhookID] }

// SigningSecretName is the name of the Secret the controller keeps for a Webhook.
func SigningSecretName(webhookName string) string { return webhookName + "-signing" }

// SigningSecretSelector selects the signing Secrets of Webhooks, and nothing else: the
// caches of the controller and of the delivery workers watch only these Secrets.
func SigningSecretSelector() labels.Selector {
	managed, _ := labels.NewRequirement(LabelManagedBy, selection.Equals, []string{ManagedByController})
	webhook, _ := labels.NewRequirement(LabelWebhookID, selection.Exists, nil)
	return labels.NewSelector().Add(*managed, *webhook)
}
