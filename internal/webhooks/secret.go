package webhooks

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/partnerstream/partnerstream/api/v1alpha1"
	"github.com/partnerstream/partnerstream/internal/webhooks/signing"
)

// RotateSecret asks the controller for a new signing secret and returns it once published.
// The previous secret keeps signing for the webhook's grace period. On ErrNotReady the
// rotation still happens when the controller comes back, but its secret is not returned.
func (s *Service) RotateSecret(ctx context.Context, companyID, id string) (string, error) {
	w, err := s.lookup(ctx, companyID, id)
	if err != nil {
		return "", err
	}
	nonce := rand.Text()
	patch := client.MergeFrom(w.DeepCopy())
	if w.Annotations == nil {
		w.Annotations = map[string]string{}
	}
	w.Annotations[v1alpha1.AnnotationRotateSecret] = nonce
	if err := s.c.Patch(ctx, w, patch); err != nil {
		return "", classify("request rotation", err)
	}
	// Handled when the status shows the annotation's value: ours, or a later request's,
	// whose secret is newer still.
	_, secret, err := s.waitForSecret(ctx, w, func(w *v1alpha1.Webhook) bool {
		return w.Status.LastRotationNonce == w.Annotations[v1alpha1.AnnotationRotateSecret]
	})
	return secret, err
}

// waitForSecret polls the Webhook until done holds, then returns it with the current secret
// of its Secret.
func (s *Service) waitForSecret(ctx context.Context, w *v1alpha1.Webhook, done func(*v1alpha1.Webhook) bool) (*v1alpha1.Webhook, string, error) {
	waitCtx, cancel := context.WithTimeout(ctx, s.opts.Wait)
	defer cancel()
	var (
		got    *v1alpha1.Webhook
		secret string
	)
	err := wait.PollUntilContextCancel(waitCtx, s.opts.PollInterval, true, func(ctx context.Context) (bool, error) {
		cur := &v1alpha1.Webhook{}
		if err := s.c.Get(ctx, client.ObjectKeyFromObject(w), cur); err != nil {
			if apierrors.IsNotFound(err) {
				return false, ErrNotFound
			}
			return false, nil
		}
		if cur.UID != w.UID {
			return false, ErrNotFound // deleted and made again meanwhile
		}
		if !done(cur) {
			return false, nil
		}
		sec := &corev1.Secret{}
		if err := s.c.Get(ctx, types.NamespacedName{Namespace: cur.Namespace, Name: cur.Status.SecretName}, sec); err != nil {
			return false, nil
		}
		keys, err := signing.FromData(sec.Data)
		if err != nil || !metav1.IsControlledBy(sec, cur) {
			return false, nil
		}
		got, secret = cur, keys.Current
		return true, nil
	})
	switch {
	case err == nil:
		return got, secret, nil
	case errors.Is(err, ErrNotFound):
		return nil, "", err
	case ctx.Err() != nil:
		return nil, "", ctx.Err()
	default:
		return nil, "", fmt.Errorf("%w (waited %s)", ErrNotReady, s.opts.Wait)
	}
}

// SigningTarget returns one of the company's webhooks as a delivery to it would be signed at
// now: its URL and its live keys, the current secret first, then the previous one while its
// grace period lasts. It reads the Secret from the API server (the test endpoint signs with
// it, the API has no informer cache); ErrNotReady when the controller has not published it.
func (s *Service) SigningTarget(ctx context.Context, companyID, id string, now time.Time) (signing.Target, error) {
	w, err := s.lookup(ctx, companyID, id)
	if err != nil {
		return signing.Target{}, err
	}
	sec := &corev1.Secret{}
	if w.Status.SecretName == "" {
		return signing.Target{}, ErrNotReady
	}
	if err := s.c.Get(ctx, types.NamespacedName{Namespace: w.Namespace, Name: w.Status.SecretName}, sec); err != nil {
		if apierrors.IsNotFound(err) {
			return signing.Target{}, ErrNotReady
		}
		return signing.Target{}, fmt.Errorf("signing secret of webhook %s: %w", id, err)
	}
	keys, err := signing.FromData(sec.Data)
	if err != nil || !metav1.IsControlledBy(sec, w) {
		return signing.Target{}, ErrNotReady // the controller replaces it
	}
	all, _ := keys.HMACKeys() // FromData checked the current key
	return signing.Target{ID: id, URL: w.Spec.URL, Secrets: signing.Live(all, now)}, nil
}
