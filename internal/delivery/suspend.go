package delivery

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/partnerstream/partnerstream/api/v1alpha1"
)

// KubeSuspender suspends Webhook resources (spec.suspend = true) through a controller-runtime
// client whose scheme has partnerstream.io/v1alpha1. It needs list and patch on webhooks in
// the namespace.
type KubeSuspender struct {
	Client    client.Client
	Namespace string
}

// NewKubeSuspender returns a Suspender for the Webhooks of the namespace.
func NewKubeSuspender(c client.Client, namespace string) *KubeSuspender {
	return &KubeSuspender{Client: c, Namespace: namespace}
}

// SuspendWebhook suspends the company's webhook with the reason ("<Reason>: <message>") in
// its annotation, which the controller shows in the Delivering condition; one already gone
// or suspended is left alone.
func (k *KubeSuspender) SuspendWebhook(ctx context.Context, companyID, webhookID, reason string) error {
	var list v1alpha1.WebhookList
	if err := k.Client.List(ctx, &list, client.InNamespace(k.Namespace),
		client.MatchingLabels{v1alpha1.LabelWebhookID: webhookID}); err != nil {
		return fmt.Errorf("suspend webhook %s: find it: %w", webhookID, err)
	}
	for i := range list.Items {
		w := &list.Items[i]
		if w.Spec.CompanyID != companyID || w.Spec.Suspend {
			continue
		}
		patch := client.MergeFrom(w.DeepCopy())
		w.Spec.Suspend = true
		if w.Annotations == nil {
			w.Annotations = map[string]string{}
		}
		w.Annotations[v1alpha1.AnnotationSuspendedReason] = reason
		if err := k.Client.Patch(ctx, w, patch); err != nil {
			return fmt.Errorf("suspend webhook %s: %w", webhookID, err)
		}
	}
	return nil
}
