package httpapi

import (
	"context"

	"github.com/gofiber/fiber/v2"

	"github.com/partnerstream/partnerstream/internal/page"
	"github.com/partnerstream/partnerstream/internal/programs"
)

// PartnershipService is what the partnership routes need (programs.Service).
type PartnershipService interface {
	Apply(ctx context.Context, a programs.Actor, in programs.ApplyInput) (programs.Partnership, bool, error)
	ListPartnerships(ctx context.Context, a programs.Actor, f programs.PartnershipFilter, p page.Request) ([]programs.Partnership, string, error)
	SetPartnershipStatus(ctx context.Context, a programs.Actor, id, to string) (programs.Partnership, error)
	UpdatePartnership(ctx context.Context, a programs.Actor, id string, in programs.PartnershipPatch) (programs.Partnership, error)
	CreateCouponCode(ctx context.Context, a programs.Actor, partnershipID string, in programs.CouponCodeInput) (programs.CouponCode, error)
	ListCouponCodes(ctx context.Context, a programs.Actor, partnershipID string, p page.Request) ([]programs.CouponCode, string, error)
}

// MountPartnerships adds the partnership routes: affiliates apply (API key or dashboard) and
// both sides list theirs; advertisers decide in the dashboard.
func (s *Server) MountPartnerships(svc PartnershipService) {
	h := partnershipHandlers{svc: svc}
	s.app.Post("/api/v1/partnerships", s.Idempotent(h.apply))
	s.app.Get("/api/v1/partnerships", h.list)
	s.app.Post("/api/partnerships", s.Idempotent(h.apply))
	s.app.Get("/api/partnerships", h.list)
	for action, to := range map[string]string{"approve": programs.Approved, "reject": programs.Rejected, "suspend": programs.Suspended} {
		s.app.Post("/api/partnerships/:id/"+action, h.setStatus(to))
	}
	s.app.Patch("/api/partnerships/:id", h.update)
	// Coupon codes: the advertiser gives them; both sides list them.
	for _, prefix := range []string{"/api/v1", "/api"} {
		s.app.Post(prefix+"/partnerships/:id/coupon-codes", s.Idempotent(h.createCouponCode))
		s.app.Get(prefix+"/partnerships/:id/coupon-codes", h.listCouponCodes)
	}
}

type partnershipHandlers struct{ svc PartnershipService }

func (h partnershipHandlers) apply(c *fiber.Ctx) error {
	var in programs.ApplyInput
	if err := DecodeJSON(c, &in); err != nil {
		return err
	}
	p, created, err := h.svc.Apply(c.UserContext(), programsActor(c), in)
	status := fiber.StatusOK
	if created {
		status = fiber.StatusCreated
	}
	return programsJSON(c, status, p, err)
}

func (h partnershipHandlers) list(c *fiber.Ctx) error {
	p, err := PageRequest(c)
	if err != nil {
		return err
	}
	f := programs.PartnershipFilter{Status: c.Query("status"), ProgramID: c.Query("program_id")}
	items, next, err := h.svc.ListPartnerships(c.UserContext(), programsActor(c), f, p)
	return programsList(c, items, next, err)
}

func (h partnershipHandlers) setStatus(to string) fiber.Handler {
	return func(c *fiber.Ctx) error {
		p, err := h.svc.SetPartnershipStatus(c.UserContext(), programsActor(c), c.Params("id"), to)
		return programsJSON(c, fiber.StatusOK, p, err)
	}
}

func (h partnershipHandlers) update(c *fiber.Ctx) error {
	var in programs.PartnershipPatch
	if err := DecodeJSON(c, &in); err != nil {
		return err
	}
	p, err := h.svc.UpdatePartnership(c.UserContext(), programsActor(c), c.Params("id"), in)
	return programsJSON(c, fiber.StatusOK, p, err)
}

func (h partnershipHandlers) createCouponCode(c *fiber.Ctx) error {
	var in programs.CouponCodeInput
	if err := DecodeJSON(c, &in); err != nil {
		return err
	}
	k, err := h.svc.CreateCouponCode(c.UserContext(), programsActor(c), c.Params("id"), in)
	return programsJSON(c, fiber.StatusCreated, k, err)
}

func (h partnershipHandlers) listCouponCodes(c *fiber.Ctx) error {
	p, err := PageRequest(c)
	if err != nil {
		return err
	}
	items, next, err := h.svc.ListCouponCodes(c.UserContext(), programsActor(c), c.Params("id"), p)
	return programsList(c, items, next, err)
}
