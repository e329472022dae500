package webhooks

import (
	"math"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/partnerstream/partnerstream/api/v1alpha1"
	"github.com/partnerstream/partnerstream/internal/freetext"
)

func (p Patch) apply(spec *v1alpha1.WebhookSpec) {
	if p.URL != nil {
		spec.URL = *p.URL
	}
	if p.Events != nil {
		spec.Events = eventTypes(p.Events)
	}
	if p.Description != nil {
		spec.Description = *p.Description
	}
	if p.Suspended != nil {
		spec.Suspend = *p.Suspended
	}
	if p.RotationGracePeriodSeconds != nil {
		spec.RotationGracePeriod = seconds(*p.RotationGracePeriodSeconds)
	}
}

func toAPI(w *v1alpha1.Webhook) Webhook {
	out := Webhook{
		ID:                         w.ID(),
		CompanyID:                  w.Spec.CompanyID,
		URL:                        w.Spec.URL,
		Events:                     make([]string, len(w.Spec.Events)),
		Description:                w.Spec.Description,
		Suspended:                  w.Spec.Suspend,
		RotationGracePeriodSeconds: int64(w.Spec.GracePeriod() / time.Second),
		SecretRotatedAt:            timePtr(w.Status.LastRotationTime),
		PreviousSecretExpiresAt:    timePtr(w.Status.PreviousSecretExpiresAt),
		CreatedAt:                  w.CreationTimestamp.UTC(),
	}
	for i, e := range w.Spec.Events {
		out.Events[i] = string(e)
	}
	for _, c := range w.Status.Conditions {
		if c.Type == v1alpha1.ConditionReady {
			// A Ready of an older generation says nothing about the current settings.
			out.Ready = c.Status == metav1.ConditionTrue && c.ObservedGeneration == w.Generation
			out.StatusMessage = c.Message
		}
	}
	return out
}

func eventTypes(in []string) []v1alpha1.EventType {
	out := make([]v1alpha1.EventType, len(in))
	for i, e := range in {
		out[i] = v1alpha1.EventType(e)
	}
	return out
}

// checkDescription applies the platform's free-text rule, which the CRD does not express,
// to what the API writes; the CRD still bounds the length of any object.
func checkDescription(d string) error {
	if msg := freetext.Check(d, 0, maxDescription, true); msg != "" {
		return &ValidationError{Message: "description: " + msg, Fields: []FieldError{{Field: "description", Message: msg}}}
	}
	return nil
}

// maxDescription is the CRD's MaxLength of spec.description.
const maxDescription = 512

// seconds converts an API number of seconds; a value too large for a Duration saturates
// instead of wrapping into a small one, so the API server's bound still refuses it.
func seconds(n int64) *metav1.Duration {
	const max = int64(math.MaxInt64 / int64(time.Second))
	if n > max {
		return &metav1.Duration{Duration: time.Duration(math.MaxInt64)}
	}
	return &metav1.Duration{Duration: time.Duration(n) * time.Second}
}

func timePtr(t *metav1.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}
