package httpapi

import (
	"context"
	"net/url"

	"github.com/gofiber/fiber/v2"

	"github.com/partnerstream/partnerstream/internal/conversions"
	"github.com/partnerstream/partnerstream/internal/ids"
)

// ConversionPostbackService is what the server-to-server conversion URL needs
// (conversions.Service).
type ConversionPostbackService interface {
	RegisterPostback(ctx context.Context, token string, in conversions.NewConversion, admit func(programID string) error) (conversions.Conversion, bool, error)
	RotatePostbackToken(ctx context.Context, advertiserID, programID string) (string, error)
}

// MountConversionPostback adds the public GET and POST /postback, for advertisers whose systems
// can only fire a URL (or post a form), and the dashboard route that makes (or replaces) a
// program's token.
func (s *Server) MountConversionPostback(svc ConversionPostbackService) {
	h := conversionPostbackHandlers{server: s, svc: svc}
	s.app.Get("/postback", h.register)
	s.app.Post("/postback", h.register)
	s.app.Post("/api/programs/:id/postback-token", advertiserOnly, requireAdminTo("make postback tokens"), h.rotateToken)
}

type conversionPostbackHandlers struct {
	// server limits each token's postbacks and throttles wrong tokens like every credential.
	server *Server
	svc    ConversionPostbackService
}

func (h conversionPostbackHandlers) register(c *fiber.Ctx) error {
	// The token never reaches a log: the error handler logs the path, not the query.
	c.Set(fiber.HeaderCacheControl, "no-store")
	// FormValue reads the query string, then a POST's form body: one handler for both.
	param := c.FormValue
	token := param("token")
	if token == "" {
		return NewProblem(fiber.StatusUnauthorized, "invalid_postback_token", "the token parameter is required")
	}
	at, err := parseTime("occurred_at", param("occurred_at"), false)
	if err != nil {
		return err
	}
	in := conversions.NewConversion{
		ClickID: param("click_id"), CouponCode: param("coupon_code"), CustomerID: param("customer_id"),
		ExternalID: param("external_id"), Type: param("type"),
		Amount: param("amount"), Currency: param("currency"), OccurredAt: at}
	// The budget belongs to the token's program, so it is taken once the token is known to
	// be valid: a wrong token spends nobody's budget, and counts against its address instead.
	admit := func(programID string) error { return h.server.postbackLimiter.allow(c, programID) }
	var conv conversions.Conversion
	var created bool
	err = h.server.credential(c, func(c *fiber.Ctx) (err error) {
		if conv, created, err = h.svc.RegisterPostback(c.UserContext(), token, in, admit); err != nil {
			return conversionsProblem(c, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	// 200 for a new conversion too: postback senders often treat anything else as failure.
	return c.JSON(fiber.Map{"id": conv.ID, "external_id": conv.ExternalID, "commission_status": conv.Commission.Status, "created": created,
		"attribution": conv.Attribution})
}

func (h conversionPostbackHandlers) rotateToken(c *fiber.Ctx) error {
	id := c.Params("id")
	if !ids.Valid(ids.Program, id) {
		return NewProblem(fiber.StatusNotFound, "not_found", "no such program")
	}
	token, err := h.svc.RotatePostbackToken(c.UserContext(), Caller(c).CompanyID, id)
	if err != nil {
		return conversionsProblem(c, err)
	}
	c.Set(fiber.HeaderCacheControl, "no-store")
	return c.Status(fiber.StatusCreated).JSON(fiber.Map{
		"program_id": id,
		"token":      token,
		"postback_url": "/postback?token=" + url.QueryEscape(token) +
			"&click_id={click_id}&external_id={external_id}&amount={amount}&currency={currency}&type=sale",
	})
}
