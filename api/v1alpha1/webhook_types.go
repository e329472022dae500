package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// EventType is a platform event a Webhook can subscribe to.
// +kubebuilder:validation:Enum=conversion.created;conversion.approved;conversion.rejected;partnership.created;commission.status_changed;commission.held;commission.released
type EventType string

// The event types a Webhook can subscribe to.
const (
	EventConversionCreated       EventType = "conversion.created"
	EventConversionApproved      EventType = "conversion.approved"
	EventConversionRejected      EventType = "conversion.rejected"
	EventPartnershipCreated      EventType = "partnership.created"
	EventCommissionStatusChanged EventType = "commission.status_changed"
	EventCommissionHeld          EventType = "commission.held"
	EventCommissionReleased      EventType = "commission.released"
)

// EventTypes lists every event type, in the order of the documentation.
var EventTypes = []EventType{
	EventConversionCreated, EventConversionApproved, EventConversionRejected,
	EventPartnershipCreated, EventCommissionStatusChanged, EventCommissionHeld, EventCommissionReleased,
}

// WebhookSpec is a company's subscription to platform events, delivered as signed POSTs.
type WebhookSpec struct {
	// CompanyID is the company that owns the subscription; it cannot change.
	// +kubebuilder:validation:Pattern=`^co_[0-9a-z]{26}$`
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="companyID is immutable"
	CompanyID string `json:"companyID"`

	// URL receives the deliveries. It must be https://; http:// is accepted only for a
	// loopback host (localhost, 127.0.0.1, [::1]) for local development. It carries no
	// credentials (user:password@): deliveries are signed, and a URL is shown to whoever
	// can read the subscription.
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="isURL(self) && url(self).getHostname() != ''",message="url must be an absolute URL with a host"
	// +kubebuilder:validation:XValidation:rule="!self.matches('[[:space:][:cntrl:]]')",message="url must not contain spaces or control characters (percent-encode them)"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^[^:/?#]+://[^/?#]*@')",message="url must not contain credentials (user:password@); deliveries are signed instead"
	// +kubebuilder:validation:XValidation:rule="!isURL(self) || url(self).getPort() == '' || (url(self).getPort().size() <= 5 && int(url(self).getPort()) >= 1 && int(url(self).getPort()) <= 65535)",message="url must have a port from 1 to 65535"
	// +kubebuilder:validation:XValidation:rule="!isURL(self) || url(self).getHostname() == '' || url(self).getScheme() == 'https' || (url(self).getScheme() == 'http' && url(self).getHostname() in ['localhost', '127.0.0.1', '::1'])",message="url must use https:// (http:// is allowed only for localhost, 127.0.0.1 and [::1])"
	URL string `json:"url"`

	// Events are the event types delivered to the URL; at least one.
	// +listType=set
	// +kubebuilder:validation:MaxItems=7
	// +kubebuilder:validation:XValidation:rule="self.size() > 0",message="at least one event is required"
	Events []EventType `json:"events"`

	// Suspend pauses deliveries; the signing secret is kept and can still be rotated.
	// +optional
	Suspend bool `json:"suspend,omitempty"`

	// Description is free text for the people who manage the subscription.
	// +kubebuilder:validation:MaxLength=512
	// +optional
	Description string `json:"description,omitempty"`

	// RotationGracePeriod is how long the previous signing secret keeps signing after a
	// rotation (a second "v1," signature), so receivers can switch without losing
	// deliveries. 0s drops it at once (a leaked secret); at most 168h (7 days).
	// +kubebuilder:default="24h"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:XValidation:rule="self.matches('^-?(0|([0-9]+([.][0-9]+)?(ns|us|µs|ms|s|m|h))+)$')",message="rotationGracePeriod must be a duration such as 24h, 90m or 0s"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^-?(0|([0-9]+([.][0-9]+)?(ns|us|µs|ms|s|m|h))+)$') || (duration(self) >= duration('0s') && duration(self) <= duration('168h'))",message="rotationGracePeriod must be between 0s and 168h (7 days)"
	// +optional
	RotationGracePeriod *metav1.Duration `json:"rotationGracePeriod,omitempty"`
}

// WebhookStatus is what the controller observed and did.
type WebhookStatus struct {
	// ObservedGeneration is the generation of the spec the status describes: the controller
	// sets it, and each condition's observedGeneration, on every reconcile of that
	// generation, successful or not. Until it equals metadata.generation the conditions
	// describe an older spec.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions: Ready is True while a signing secret is published. When a reconcile fails,
	// Ready is False and either Reconciling is True (a transient failure, retried) or
	// Stalled is True (a terminal one, such as a foreign Secret of the signing Secret's name,
	// that needs someone to act), as kstatus-based tools read them.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// SecretName is the Secret (same namespace) holding the signing secrets: key "current",
	// and during a rotation's grace period "previous" and "previous-expires-at".
	// +optional
	SecretName string `json:"secretName,omitempty"`

	// LastRotationNonce is the last value of the partnerstream.io/rotate-secret annotation
	// the controller handled; a client that set a value waits until it shows here.
	// +optional
	LastRotationNonce string `json:"lastRotationNonce,omitempty"`

	// LastRotationTime is when the current secret replaced the previous one.
	// +optional
	LastRotationTime *metav1.Time `json:"lastRotationTime,omitempty"`

	// PreviousSecretExpiresAt is when the previous secret stops signing; empty when there
	// is no previous secret.
	// +optional
	PreviousSecretExpiresAt *metav1.Time `json:"previousSecretExpiresAt,omitempty"`
}

// Webhook is a company's subscription to platform events, delivered as Standard Webhooks
// signed POSTs. The controller keeps its signing Secret. It watches only its own namespace
// (its --namespace setting): a Webhook applied in another namespace gets no status, no
// signing Secret and no deliveries.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=wh,categories=partnerstream
// +kubebuilder:selectablefield:JSONPath=".spec.companyID"
// +kubebuilder:validation:XValidation:rule="self.metadata.name.size() <= 63",message="metadata.name must be at most 63 characters (a DNS label)"
// +kubebuilder:printcolumn:name="URL",type=string,JSONPath=".spec.url"
// +kubebuilder:printcolumn:name="Events",type=string,JSONPath=".spec.events"
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=".metadata.creationTimestamp"
// +kubebuilder:printcolumn:name="Company",type=string,JSONPath=".spec.companyID",priority=1
// +kubebuilder:printcolumn:name="Suspended",type=boolean,JSONPath=".spec.suspend",priority=1
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].message`,priority=1
type Webhook struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   WebhookSpec   `json:"spec"`
	Status WebhookStatus `json:"status,omitempty"`
}

// WebhookList is a list of Webhooks.
// +kubebuilder:object:root=true
type WebhookList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Webhook `json:"items"`
}
