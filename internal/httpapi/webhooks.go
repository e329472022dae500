package httpapi

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/partnerstream/partnerstream/internal/page"
	"github.com/partnerstream/partnerstream/internal/webhooks"
)

// WebhookService is what the webhook routes need from internal/webhooks (Webhook resources
// in Kubernetes, scoped by company).
type WebhookService interface {
	List(ctx context.Context, companyID string, p page.Request) (page.List[webhooks.Webhook], error)
	Get(ctx context.Context, companyID, id string) (webhooks.Webhook, error)
	Create(ctx context.Context, companyID string, in webhooks.Input) (webhooks.Webhook, string, error)
	Update(ctx context.Context, companyID, id string, p webhooks.Patch) (webhooks.Webhook, error)
	Delete(ctx context.Context, companyID, id string) error
	RotateSecret(ctx context.Context, companyID, id string) (string, error)
}

// createdWebhook is the one webhook response that carries the signing secret.
type createdWebhook struct {
	webhooks.Webhook
	Secret string `json:"secret"`
}

// rotatedSecret answers a rotation: the new secret, shown only here, and until when the
// previous one keeps signing (null without a grace period).
type rotatedSecret struct {
	Secret                  string     `json:"secret"`
	PreviousSecretExpiresAt *time.Time `json:"previous_secret_expires_at"`
}

// maxGraceSeconds bounds a rotation grace period (7 days) for webhooks and postbacks alike.
const maxGraceSeconds = 7 * 24 * 60 * 60

// notReadyRetryAfter is the Retry-After of a 503 when the controller did not answer in time.
const notReadyRetryAfter = 5 * time.Second

// MountWebhooks adds the dashboard's webhook routes (the caller's company only) and the
// public API's read-only list. A nil service (an api without a Kubernetes API) keeps the
// routes and answers 503 webhooks_unavailable.
func (s *Server) MountWebhooks(svc WebhookService) {
	if svc == nil {
		svc = noWebhooks{}
	}
	h := webhookHandlers{svc: svc, log: s.log}
	admin := requireAdminTo("manage webhooks")
	s.app.Get("/api/webhooks", h.list)
	s.app.Get("/api/v1/webhooks", h.list)
	s.app.Post("/api/webhooks", admin, s.Idempotent(h.create))
	s.app.Get("/api/webhooks/:id", h.get)
	s.app.Patch("/api/webhooks/:id", admin, h.update)
	s.app.Delete("/api/webhooks/:id", admin, h.delete)
	s.app.Put("/api/webhooks/:id/rotate-secret", admin, h.rotateSecret)
}

type webhookHandlers struct {
	svc WebhookService
	log *slog.Logger
}

func (h webhookHandlers) list(c *fiber.Ctx) error {
	p, err := PageRequest(c)
	if err != nil {
		return err
	}
	l, err := h.svc.List(c.UserContext(), Caller(c).CompanyID, p)
	if err != nil {
		return webhookProblem(c, err)
	}
	l.Data = nonNil(l.Data)
	return c.JSON(l)
}

func (h webhookHandlers) create(c *fiber.Ctx) error {
	var in webhooks.Input
	if err := DecodeJSON(c, &in); err != nil {
		return err
	}
	if err := checkGrace("rotation_grace_period_seconds", in.RotationGracePeriodSeconds); err != nil {
		return err
	}
	w, secret, err := h.svc.Create(c.UserContext(), Caller(c).CompanyID, in)
	if err != nil {
		return webhookProblem(c, err)
	}
	c.Set(fiber.HeaderCacheControl, "no-store")
	return c.Status(fiber.StatusCreated).JSON(createdWebhook{Webhook: w, Secret: secret})
}

func (h webhookHandlers) get(c *fiber.Ctx) error {
	w, err := h.svc.Get(c.UserContext(), Caller(c).CompanyID, c.Params("id"))
	if err != nil {
		return webhookProblem(c, err)
	}
	return c.JSON(w)
}

func (h webhookHandlers) update(c *fiber.Ctx) error {
	var p webhooks.Patch
	if err := DecodeJSON(c, &p); err != nil {
		return err
	}
	if err := checkGrace("rotation_grace_period_seconds", p.RotationGracePeriodSeconds); err != nil {
		return err
	}
	w, err := h.svc.Update(c.UserContext(), Caller(c).CompanyID, c.Params("id"), p)
	if err != nil {
		return webhookProblem(c, err)
	}
	return c.JSON(w)
}

func (h webhookHandlers) delete(c *fiber.Ctx) error {
	if err := h.svc.Delete(c.UserContext(), Caller(c).CompanyID, c.Params("id")); err != nil {
		return webhookProblem(c, err)
	}
	return c.SendStatus(fiber.StatusNoContent)
}

func (h webhookHandlers) rotateSecret(c *fiber.Ctx) error {
	// The grace period is the webhook's own setting (PATCH it first to change it).
	if err := decodeOptionalJSON(c, &struct{}{}); err != nil {
		return err
	}
	company, id := Caller(c).CompanyID, c.Params("id")
	secret, err := h.svc.RotateSecret(c.UserContext(), company, id)
	if err != nil {
		return webhookProblem(c, err)
	}
	// The secret is already in use: failing now would lose it, and rotating again would
	// end the grace of the secret receivers still verify with. So reading the expiry back
	// is best effort.
	out := rotatedSecret{Secret: secret}
	if w, err := h.svc.Get(c.UserContext(), company, id); err == nil {
		out.PreviousSecretExpiresAt = w.PreviousSecretExpiresAt
	} else {
		h.log.Warn("read webhook after rotation", "request_id", RequestID(c), "webhook_id", id, "err", err)
	}
	c.Set(fiber.HeaderCacheControl, "no-store")
	return c.JSON(out)
}

// webhookProblem maps the webhook service's errors to problems; anything else is a 500.
func webhookProblem(c *fiber.Ctx, err error) error {
	var ve *webhooks.ValidationError
	switch {
	case errors.Is(err, webhooks.ErrNotFound):
		return NewProblem(fiber.StatusNotFound, "not_found", "no such webhook")
	case errors.As(err, &ve):
		if len(ve.Fields) == 0 {
			return NewProblem(fiber.StatusBadRequest, "validation_failed", ve.Message).With("errors", []FieldError{})
		}
		fields := make([]FieldError, len(ve.Fields))
		for i, f := range ve.Fields {
			fields[i] = FieldError{Field: f.Field, Message: f.Message}
		}
		return Invalid(fields...)
	case errors.Is(err, errNoKubernetes):
		return NewProblem(fiber.StatusServiceUnavailable, "webhooks_unavailable", err.Error())
	case errors.Is(err, webhooks.ErrNotReady):
		c.Set(fiber.HeaderRetryAfter, strconv.Itoa(int(notReadyRetryAfter/time.Second)))
		detail := "the webhook controller did not publish the signing secret in time; the webhook was not created, try again"
		if c.Method() == fiber.MethodPut {
			detail = "the webhook controller did not publish the new signing secret in time; the rotation still happens, but its secret cannot be shown: rotate again later"
		}
		return NewProblem(fiber.StatusServiceUnavailable, "webhook_controller_unavailable", detail)
	}
	return err
}

// checkGrace refuses a grace period outside 0 to 7 days before it is turned into a duration,
// which a huge number of seconds would overflow.
func checkGrace(field string, seconds *int64) error {
	if seconds != nil && (*seconds < 0 || *seconds > maxGraceSeconds) {
		return Invalid(FieldError{Field: field, Message: "must be between 0 and " + strconv.Itoa(maxGraceSeconds) + " seconds (7 days)"})
	}
	return nil
}

// noWebhooks stands in when the api has no Kubernetes API to keep Webhook resources in.
type noWebhooks struct{}

// errNoKubernetes is answered by every method of noWebhooks.
var errNoKubernetes = errors.New("webhook subscriptions need the Kubernetes API, which this api has not configured")

func (noWebhooks) List(context.Context, string, page.Request) (page.List[webhooks.Webhook], error) {
	return page.List[webhooks.Webhook]{}, errNoKubernetes
}
func (noWebhooks) Get(context.Context, string, string) (webhooks.Webhook, error) {
	return webhooks.Webhook{}, errNoKubernetes
}
func (noWebhooks) Create(context.Context, string, webhooks.Input) (webhooks.Webhook, string, error) {
	return webhooks.Webhook{}, "", errNoKubernetes
}
func (noWebhooks) Update(context.Context, string, string, webhooks.Patch) (webhooks.Webhook, error) {
	return webhooks.Webhook{}, errNoKubernetes
}
func (noWebhooks) Delete(context.Context, string, string) error { return errNoKubernetes }
func (noWebhooks) RotateSecret(context.Context, string, string) (string, error) {
	return "", errNoKubernetes
}
