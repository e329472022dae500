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
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/partnerstream/partnerstream/api/v1alpha1"
	"github.com/partnerstream/partnerstream/internal/ids"
	"github.com/partnerstream/partnerstream/internal/page"
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
