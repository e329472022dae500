// Package webhooks is the dashboard API's view of webhook subscriptions: Webhook custom
// resources (partnerstream.io/v1alpha1) in one namespace, each scoped to its company. The
// API server validates them (CEL rules of the CRD) and the controller keeps their signing
// Secrets; this package creates, lists, edits and deletes them, and hands out a secret when
// it is created or rotated. The delivery workers read subscriptions through Cache instead.
//
// A company never sees another's objects: every lookup filters on spec.companyID on the
// server (a selectable field that, unlike a label, cannot be edited), and a foreign id is
// simply not found.
package webhooks

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/partnerstream/partnerstream/api/v1alpha1"
	"github.com/partnerstream/partnerstream/internal/freetext"
	"github.com/partnerstream/partnerstream/internal/ids"
	"github.com/partnerstream/partnerstream/internal/page"
	"github.com/partnerstream/partnerstream/internal/webhooks/signing"
)

// Webhook is a subscription as the API shows it.
type Webhook struct {
	ID          string   `json:"id"`
	CompanyID   string   `json:"company_id"`
	URL         string   `json:"url"`
	Events      []string `json:"events"`
	Description string   `json:"description"`
	Suspended   bool     `json:"suspended"`
	// RotationGracePeriodSeconds is how long the previous secret keeps signing after a
	// rotation (0 to 604800).
	RotationGracePeriodSeconds int64 `json:"rotation_grace_period_seconds"`
	// Ready is true once the signing secret is published for the current settings.
	Ready bool `json:"ready"`
	// StatusMessage explains Ready (the controller's condition message).
	StatusMessage           string     `json:"status_message,omitempty"`
	SecretRotatedAt         *time.Time `json:"secret_rotated_at"`
	PreviousSecretExpiresAt *time.Time `json:"previous_secret_expires_at"`
	CreatedAt               time.Time  `json:"created_at"`
}

// Input is a new subscription.
type Input struct {
	URL         string   `json:"url"`
	Events      []string `json:"events"`
	Description string   `json:"description"`
	Suspended   bool     `json:"suspended"`
	// RotationGracePeriodSeconds defaults to 24 hours when nil.
	RotationGracePeriodSeconds *int64 `json:"rotation_grace_period_seconds"`
}

// Patch changes the fields that are set (a nil Events leaves the events as they are).
type Patch struct {
	URL                        *string  `json:"url"`
	Events                     []string `json:"events"`
	Description                *string  `json:"description"`
	Suspended                  *bool    `json:"suspended"`
	RotationGracePeriodSeconds *int64   `json:"rotation_grace_period_seconds"`
}

// ErrNotFound is returned for an id that does not exist, or belongs to another company.
var ErrNotFound = errors.New("webhook not found")

// ErrNotReady is returned when the controller did not publish the signing secret within the
// wait: a new subscription is then removed again, a rotation still happens later.
var ErrNotReady = errors.New("the webhook controller did not publish the signing secret in time")

// ValidationError is the API server's refusal of a subscription (the CRD's rules).
type ValidationError struct {
	// Message is the server's message, e.g. `Webhook.partnerstream.io "wh-..." is invalid:
	// spec.url: Invalid value: "http://x.example": url must use https:// ...`.
	Message string
	// Fields are the causes, named by the API's JSON fields ("url", "events[0]").
	Fields []FieldError
}

// FieldError is one refused field.
type FieldError struct {
	Field   string `json:"field,omitempty"`
	Message string `json:"message"`
}

func (e *ValidationError) Error() string { return "invalid webhook: " + e.Message }

// Options configure a Service.
type Options struct {
	// Namespace holds the Webhooks (--namespace).
	Namespace string
	// Wait bounds how long Create and RotateSecret wait for the controller; 10 s when 0.
	Wait time.Duration
	// PollInterval is how often they look; 50 ms when 0.
	PollInterval time.Duration
}

// Service manages Webhook resources for the dashboard API.
type Service struct {
	c    client.Client
	opts Options
}

// NewService returns a Service on a client whose scheme has partnerstream.io/v1alpha1. It
// needs get, list, create, update, patch and delete on webhooks and get on secrets in the
// namespace.
func NewService(c client.Client, o Options) *Service {
	if o.Wait <= 0 {
		o.Wait = 10 * time.Second
	}
	if o.PollInterval <= 0 {
		o.PollInterval = 50 * time.Millisecond
	}
	return &Service{c: c, opts: o}
}

// List returns a page of the company's webhooks, newest first.
func (s *Service) List(ctx context.Context, companyID string, p page.Request) (page.List[Webhook], error) {
	var list v1alpha1.WebhookList
	if err := s.c.List(ctx, &list, client.InNamespace(s.opts.Namespace),
		client.MatchingFields{v1alpha1.FieldCompanyID: companyID}); err != nil {
		return page.List[Webhook]{}, fmt.Errorf("list webhooks: %w", err)
	}
	// A company has few subscriptions: fetching them all and cutting the page here keeps
	// the cursor the id (stable, never expiring) instead of a short-lived continue token.
	out := make([]Webhook, 0, len(list.Items))
	for i := range list.Items {
		w := &list.Items[i]
		// An object applied with kubectl has no id until the controller labels it.
		if id := w.ID(); id != "" && (p.Before == "" || id < p.Before) {
			out = append(out, toAPI(w))
		}
	}
	slices.SortFunc(out, func(a, b Webhook) int { return strings.Compare(b.ID, a.ID) })
	limit := p.Limit
	if limit <= 0 {
		limit = page.DefaultLimit
	}
	data, next := page.Cut(out, limit, func(w Webhook) string { return w.ID })
	return page.List[Webhook]{Data: data, NextCursor: next}, nil
}

// Get returns one of the company's webhooks.
func (s *Service) Get(ctx context.Context, companyID, id string) (Webhook, error) {
	w, err := s.lookup(ctx, companyID, id)
	if err != nil {
		return Webhook{}, err
	}
	return toAPI(w), nil
}

// Create makes a subscription and returns it with its signing secret, which is shown only
// this once (RotateSecret makes a new one). It waits for the controller to publish the
// secret; if it does not in time, the subscription is removed and ErrNotReady returned.
func (s *Service) Create(ctx context.Context, companyID string, in Input) (Webhook, string, error) {
	if err := checkDescription(in.Description); err != nil {
		return Webhook{}, "", err
	}
	id := ids.New(ids.Webhook)
	w := &v1alpha1.Webhook{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: s.opts.Namespace,
			Name:      v1alpha1.ObjectName(id),
			Labels:    map[string]string{v1alpha1.LabelCompanyID: companyID, v1alpha1.LabelWebhookID: id},
		},
		Spec: v1alpha1.WebhookSpec{
			CompanyID:   companyID,
			URL:         in.URL,
			Events:      eventTypes(in.Events),
			Suspend:     in.Suspended,
			Description: in.Description,
		},
	}
	if in.RotationGracePeriodSeconds != nil {
		w.Spec.RotationGracePeriod = seconds(*in.RotationGracePeriodSeconds)
	}
	if err := s.c.Create(ctx, w); err != nil {
		return Webhook{}, "", classify("create webhook", err)
	}
	ready, secret, err := s.waitForSecret(ctx, w, func(w *v1alpha1.Webhook) bool { return w.Status.SecretName != "" })
	if err != nil {
		// Nobody has seen the secret: a subscription nobody can verify is worse than none.
		cleanup, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if derr := s.c.Delete(cleanup, w, client.Preconditions{UID: &w.UID}); derr != nil && !apierrors.IsNotFound(derr) {
			err = errors.Join(err, fmt.Errorf("remove the unfinished webhook %s: %w", id, derr))
		}
		return Webhook{}, "", err
	}
	return toAPI(ready), secret, nil
}

// Update applies the patch to one of the company's webhooks.
func (s *Service) Update(ctx context.Context, companyID, id string, p Patch) (Webhook, error) {
	if p.Description != nil {
		if err := checkDescription(*p.Description); err != nil {
			return Webhook{}, err
		}
	}
	var updated *v1alpha1.Webhook
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		w, err := s.lookup(ctx, companyID, id)
		if err != nil {
			return err
		}
		p.apply(&w.Spec)
		if err := s.c.Update(ctx, w); err != nil {
			return err
		}
		updated = w
		return nil
	})
	if err != nil {
		return Webhook{}, classify("update webhook", err)
	}
	return toAPI(updated), nil
}

// Delete removes one of the company's webhooks; the controller's owner reference takes its
// Secret with it.
func (s *Service) Delete(ctx context.Context, companyID, id string) error {
	w, err := s.lookup(ctx, companyID, id)
	if err != nil {
		return err
	}
	if err := s.c.Delete(ctx, w, client.Preconditions{UID: &w.UID}); err != nil {
		return classify("delete webhook", err)
	}
	return nil
}

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

// lookup finds the company's webhook by id. The id is a label; the company filter runs on
// the server, on the immutable spec field.
func (s *Service) lookup(ctx context.Context, companyID, id string) (*v1alpha1.Webhook, error) {
	if !ids.Valid(ids.Webhook, id) || !ids.Valid(ids.Company, companyID) {
		return nil, ErrNotFound
	}
	var list v1alpha1.WebhookList
	if err := s.c.List(ctx, &list, client.InNamespace(s.opts.Namespace),
		client.MatchingLabels{v1alpha1.LabelWebhookID: id},
		client.MatchingFields{v1alpha1.FieldCompanyID: companyID}); err != nil {
		return nil, fmt.Errorf("find webhook %s: %w", id, err)
	}
	switch len(list.Items) {
	case 0:
		return nil, ErrNotFound
	case 1:
		return &list.Items[0], nil
	default:
		return nil, fmt.Errorf("webhook id %s is on %d objects; an admin copied its %s label", id, len(list.Items), v1alpha1.LabelWebhookID)
	}
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

// apiFields names the CRD's fields as the API does.
var apiFields = map[string]string{
	"spec.companyID":           "company_id",
	"spec.url":                 "url",
	"spec.events":              "events",
	"spec.description":         "description",
	"spec.suspend":             "suspended",
	"spec.rotationGracePeriod": "rotation_grace_period_seconds",
}

// classify turns the API server's refusal into a ValidationError and a missing object into
// ErrNotFound; anything else is wrapped as it is.
func classify(op string, err error) error {
	var status apierrors.APIStatus
	switch {
	case errors.Is(err, ErrNotFound), apierrors.IsNotFound(err):
		return ErrNotFound
	case apierrors.IsInvalid(err) && errors.As(err, &status):
		st := status.Status()
		v := &ValidationError{Message: st.Message}
		if st.Details != nil {
			for _, c := range st.Details.Causes {
				if strings.HasPrefix(c.Message, "Invalid value: null: some validation rules were not checked") {
					continue // says only that the CEL rules wait for the other errors
				}
				field := c.Field
				if field == "<nil>" { // a rule on the whole object
					field = ""
				}
				v.Fields = append(v.Fields, FieldError{Field: apiField(field), Message: c.Message})
			}
		}
		return v
	default:
		return fmt.Errorf("%s: %w", op, err)
	}
}

// apiField maps "spec.events[1]" to "events[1]"; unknown paths stay as they are.
func apiField(path string) string {
	for crd, api := range apiFields {
		if rest, ok := strings.CutPrefix(path, crd); ok && (rest == "" || rest[0] == '[' || rest[0] == '.') {
			return api + rest
		}
	}
	return path
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
