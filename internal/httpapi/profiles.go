package httpapi

import (
	"context"

	"github.com/gofiber/fiber/v2"

	"github.com/partnerstream/partnerstream/internal/programs"
)

// ProfileService is what the partner profile routes need (programs.Service).
type ProfileService interface {
	OwnProfile(ctx context.Context, a programs.Actor) (programs.Profile, error)
	UpdateProfile(ctx context.Context, a programs.Actor, in programs.ProfileInput) (programs.Profile, error)
	PartnerProfile(ctx context.Context, a programs.Actor, affiliateID string) (programs.Profile, error)
}

// MountProfiles adds the partner profile routes: an affiliate reads and saves its own, a
// brand reads those of the affiliates that applied to its programs.
func (s *Server) MountProfiles(svc ProfileService) {
	h := profileHandlers{svc: svc}
	s.app.Get("/api/profile", h.own)
	s.app.Put("/api/profile", h.update)
	s.app.Get("/api/affiliates/:id/profile", h.partner)
}

type profileHandlers struct{ svc ProfileService }

func (h profileHandlers) own(c *fiber.Ctx) error {
	p, err := h.svc.OwnProfile(c.UserContext(), programsActor(c))
	return programsJSON(c, fiber.StatusOK, p, err)
}

func (h profileHandlers) update(c *fiber.Ctx) error {
	var in programs.ProfileInput
	if err := DecodeJSON(c, &in); err != nil {
		return err
	}
	p, err := h.svc.UpdateProfile(c.UserContext(), programsActor(c), in)
	return programsJSON(c, fiber.StatusOK, p, err)
}

func (h profileHandlers) partner(c *fiber.Ctx) error {
	p, err := h.svc.PartnerProfile(c.UserContext(), programsActor(c), c.Params("id"))
	return programsJSON(c, fiber.StatusOK, p, err)
}
