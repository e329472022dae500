package httpapi

import (
	"context"
	"errors"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/partnerstream/partnerstream/internal/billing"
)

// IntegrationService is what the billing integrations need (*billing.Service).
type IntegrationService interface {
	ConnectStripe(ctx context.Context, advertiserID, programID, secret string) (string, error)
	StripeIntegration(ctx context.Context, advertiserID, programID string) (billing.Integration, error)
	DisconnectStripe(ctx context.Context, advertiserID, programID string) error
	ReceiveStripe(ctx context.Context, token string, payload []byte, signature string) (billing.Outcome, error)
}

// stripeRoute is the public endpoint Stripe posts a program's events to. Its token is a
// credential: the route is one of secretRoutes, so no log line names its path.
const stripeRoute = "/api/integrations/stripe/:token"

// MountIntegrations adds the public Stripe endpoint and the dashboard routes that connect,
// show and disconnect a program's.
func (s *Server) MountIntegrations(svc IntegrationService) {
	h := integrationHandlers{server: s, svc: svc}
	s.secretRoutes = append(s.secretRoutes, stripeRoute)
	s.Public(fiber.MethodPost, stripeRoute, h.receiveStripe)
	const program = "/api/programs/:id/integrations/stripe"
	s.app.Get(program, advertiserOnly, h.stripe)
	s.app.Put(program, advertiserOnly, requireAdminTo("connect billing integrations"), h.connectStripe)
	s.app.Delete(program, advertiserOnly, requireAdminTo("disconnect billing integrations"), h.disconnectStripe)
}

type integrationHandlers struct {
	// server throttles addresses that send wrong tokens, like every credential.
	server *Server
	svc    IntegrationService
}

// receiveStripe answers as Stripe expects: 2xx for an event handled now or before (Stripe
// stops sending it), 400 for a signature that does not verify, and a 5xx when the event could
// not be handled yet (Stripe sends it again later).
func (h integrationHandlers) receiveStripe(c *fiber.Ctx) error {
	var out billing.Outcome
	err := h.server.credential(c, func(c *fiber.Ctx) (err error) {
		out, err = h.svc.ReceiveStripe(c.UserContext(), c.Params("token"), c.Body(), c.Get("Stripe-Signature"))
		if errors.Is(err, billing.ErrInvalidToken) {
			return NewProblem(fiber.StatusUnauthorized, "invalid_integration_token", "the integration token in the URL is malformed, unknown or was replaced")
		}
		return err
	})
	switch {
	case errors.Is(err, billing.ErrBadSignature):
		return NewProblem(fiber.StatusBadRequest, "invalid_signature", "the Stripe-Signature header does not sign this body with the endpoint's secret (or is missing, or older than 5 minutes)")
	case err != nil:
		return err
	}
	return c.JSON(fiber.Map{"event_id": out.EventID, "type": out.Type, "outcome": out.Outcome,
		"conversion_id": nullable(out.ConversionID), "detail": nullable(out.Detail)})
}

type stripeIntegrationJSON struct {
	ProgramID   string     `json:"program_id"`
	CreatedAt   time.Time  `json:"created_at"`
	LastEventAt *time.Time `json:"last_event_at"`
	// The path of the URL to give Stripe (after the api's base URL), only in the answer that
	// made it: its token is not stored.
	WebhookURL string `json:"webhook_url,omitempty"`
}

func (h integrationHandlers) stripe(c *fiber.Ctx) error {
	in, err := h.svc.StripeIntegration(c.UserContext(), Caller(c).CompanyID, c.Params("id"))
	if err != nil {
		return integrationProblem(err)
	}
	return c.JSON(stripeIntegrationJSON{ProgramID: in.ProgramID, CreatedAt: in.CreatedAt, LastEventAt: in.LastEventAt})
}

func (h integrationHandlers) connectStripe(c *fiber.Ctx) error {
	var body struct {
		EndpointSecret string `json:"endpoint_secret"`
	}
	if err := DecodeJSON(c, &body); err != nil {
		return err
	}
	advertiser, program := Caller(c).CompanyID, c.Params("id")
	token, err := h.svc.ConnectStripe(c.UserContext(), advertiser, program, body.EndpointSecret)
	if err != nil {
		return integrationProblem(err)
	}
	in, err := h.svc.StripeIntegration(c.UserContext(), advertiser, program)
	if err != nil {
		return integrationProblem(err)
	}
	c.Set(fiber.HeaderCacheControl, "no-store")
	return c.JSON(stripeIntegrationJSON{ProgramID: in.ProgramID, CreatedAt: in.CreatedAt, LastEventAt: in.LastEventAt,
		WebhookURL: "/api/integrations/stripe/" + token})
}

func (h integrationHandlers) disconnectStripe(c *fiber.Ctx) error {
	if err := h.svc.DisconnectStripe(c.UserContext(), Caller(c).CompanyID, c.Params("id")); err != nil {
		return integrationProblem(err)
	}
	return c.SendStatus(fiber.StatusNoContent)
}

func integrationProblem(err error) error {
	var inv *billing.InvalidError
	switch {
	case errors.As(err, &inv):
		return Invalid(FieldError{Field: inv.Field, Message: inv.Message})
	case errors.Is(err, billing.ErrNotFound):
		return NewProblem(fiber.StatusNotFound, "not_found", "no such program of yours, or it has no Stripe integration")
	}
	return err
}

// nullable is nil for "", so that JSON says null.
func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
