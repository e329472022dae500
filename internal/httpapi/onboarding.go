package httpapi

import (
	"context"

	"github.com/gofiber/fiber/v2"

	"github.com/partnerstream/partnerstream/internal/programs"
)

// OnboardingService is what the onboarding routes need (programs.Service).
type OnboardingService interface {
	Onboarding(ctx context.Context, a programs.Actor) (programs.Onboarding, error)
	DismissOnboarding(ctx context.Context, a programs.Actor) (programs.Onboarding, error)
	RegisterTestConversion(ctx context.Context, a programs.Actor, source string, in programs.TestConversionInput) (programs.TestConversion, error)
}

// MountOnboarding adds a brand's first steps (dashboard) and its test conversions: from its
// server with an API key, the way real conversions arrive, or from the dashboard.
func (s *Server) MountOnboarding(svc OnboardingService) {
	h := onboardingHandlers{svc: svc}
	s.app.Get("/api/onboarding", h.get)
	s.app.Post("/api/onboarding/dismiss", h.dismiss)
	s.app.Post("/api/onboarding/test-conversion", s.Idempotent(h.test(programs.TestFromDashboard)))
	s.app.Post("/api/v1/conversions/test", s.Idempotent(h.test(programs.TestFromAPI)))
}

type onboardingHandlers struct{ svc OnboardingService }

func (h onboardingHandlers) get(c *fiber.Ctx) error {
	o, err := h.svc.Onboarding(c.UserContext(), programsActor(c))
	return programsJSON(c, fiber.StatusOK, o, err)
}

func (h onboardingHandlers) dismiss(c *fiber.Ctx) error {
	o, err := h.svc.DismissOnboarding(c.UserContext(), programsActor(c))
	return programsJSON(c, fiber.StatusOK, o, err)
}

func (h onboardingHandlers) test(source string) fiber.Handler {
	return func(c *fiber.Ctx) error {
		var in programs.TestConversionInput
		if err := DecodeJSON(c, &in); err != nil {
			return err
		}
		t, err := h.svc.RegisterTestConversion(c.UserContext(), programsActor(c), source, in)
		return programsJSON(c, fiber.StatusCreated, t, err)
	}
}
