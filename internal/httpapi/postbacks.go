package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/partnerstream/partnerstream/internal/postbacks"
)

// PostbackService is what the postback routes need from internal/postbacks (the company's
// postback URL and signing secret, in Postgres).
type PostbackService interface {
	Get(ctx context.Context, companyID string) (postbacks.Settings, error)
	SetURL(ctx context.Context, companyID string, url *string) (postbacks.Settings, string, error)
	RotateSecret(ctx context.Context, companyID string, grace time.Duration) (postbacks.Settings, string, error)
}

// postbackSettings answers a PUT of the URL: the settings, with the secret only when this
// call created it (the first URL).
type postbackSettings struct {
	postbacks.Settings
	Secret string `json:"secret,omitempty"`
}

// MountPostbacks adds the postback settings routes: the dashboard's (every member reads,
// owners and admins change the URL and rotate the secret) and the public API's URL setting.
func (s *Server) MountPostbacks(svc PostbackService) {
	h := postbackHandlers{svc: svc}
	s.app.Get("/api/postbacks", h.get)
	s.app.Put("/api/postbacks", requireAdminTo("change the postback settings"), h.setURL)
	s.app.Put("/api/postbacks/rotate-secret", requireAdminTo("rotate the postback secret"), h.rotateSecret)
	// The public API sets the URL too (an integrator's deployment script); rotating the
	// secret stays a dashboard action of owners and admins.
	s.app.Get("/api/v1/postbacks", h.get)
	s.app.Put("/api/v1/postbacks", h.setURL)
}

type postbackHandlers struct{ svc PostbackService }

func (h postbackHandlers) get(c *fiber.Ctx) error {
	set, err := h.svc.Get(c.UserContext(), Caller(c).CompanyID)
	if err != nil {
		return err
	}
	return c.JSON(set)
}

func (h postbackHandlers) setURL(c *fiber.Ctx) error {
	var in struct {
		URL json.RawMessage `json:"url"`
	}
	if err := DecodeJSON(c, &in); err != nil {
		return err
	}
	url, err := nullableString("url", in.URL)
	if err != nil {
		return err
	}
	set, secret, err := h.svc.SetURL(c.UserContext(), Caller(c).CompanyID, url)
	if err != nil {
		return postbackProblem(err)
	}
	if secret != "" {
		c.Set(fiber.HeaderCacheControl, "no-store")
	}
	return c.JSON(postbackSettings{Settings: set, Secret: secret})
}

func (h postbackHandlers) rotateSecret(c *fiber.Ctx) error {
	var in struct {
		GracePeriodSeconds *int64 `json:"grace_period_seconds"`
	}
	if err := decodeOptionalJSON(c, &in); err != nil {
		return err
	}
	if err := checkGrace("grace_period_seconds", in.GracePeriodSeconds); err != nil {
		return err
	}
	grace := postbacks.DefaultGrace
	if in.GracePeriodSeconds != nil {
		grace = time.Duration(*in.GracePeriodSeconds) * time.Second
	}
	set, secret, err := h.svc.RotateSecret(c.UserContext(), Caller(c).CompanyID, grace)
	if err != nil {
		return postbackProblem(err)
	}
	c.Set(fiber.HeaderCacheControl, "no-store")
	return c.JSON(rotatedSecret{Secret: secret, PreviousSecretExpiresAt: set.PreviousSecretExpiresAt})
}

// postbackProblem maps the postback service's errors to problems; anything else is a 500.
func postbackProblem(err error) error {
	var ve *postbacks.ValidationError
	switch {
	case errors.As(err, &ve):
		return Invalid(FieldError{Field: ve.Field, Message: ve.Message})
	case errors.Is(err, postbacks.ErrNotConfigured):
		return NewProblem(fiber.StatusConflict, "postback_not_configured", "set a postback URL first: its secret is created and shown then")
	}
	return err
}
