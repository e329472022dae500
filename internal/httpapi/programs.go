package httpapi

import (
	"context"
	"errors"

	"github.com/gofiber/fiber/v2"

	"github.com/partnerstream/partnerstream/internal/page"
	"github.com/partnerstream/partnerstream/internal/programs"
)

// ProgramService is what the program and promotion routes need (programs.Service).
type ProgramService interface {
	ListPrograms(ctx context.Context, a programs.Actor, f programs.ProgramFilter, p page.Request) ([]programs.Program, string, error)
	Program(ctx context.Context, a programs.Actor, id string) (programs.Program, error)
	CreateProgram(ctx context.Context, a programs.Actor, in programs.ProgramInput) (programs.Program, error)
	UpdateProgram(ctx context.Context, a programs.Actor, id string, in programs.ProgramPatch) (programs.Program, error)
	ListPromotions(ctx context.Context, a programs.Actor, f programs.PromotionFilter, p page.Request) ([]programs.Promotion, string, error)
	CreatePromotion(ctx context.Context, a programs.Actor, programID string, in programs.PromotionInput) (programs.Promotion, error)
	UpdatePromotion(ctx context.Context, a programs.Actor, id string, in programs.PromotionPatch) (programs.Promotion, error)
}

// MountPrograms adds the program and promotion routes: reading in every family (each caller
// sees what docs/programs.md says), managing in the dashboard.
func (s *Server) MountPrograms(svc ProgramService) {
	h := programHandlers{svc: svc}
	s.app.Get("/api/v1/programs", h.listPrograms(false))
	s.app.Get("/api/v1/programs/:id", h.getProgram)
	s.app.Get("/api/v1/promotions", h.listPromotions)
	// The partner API lists only the caller's programs (partnered); the catalogue an
	// affiliate browses to find new ones is /api/v1/programs.
	s.app.Get("/api/partner-api/programs", h.listPrograms(true))

	s.app.Get("/api/programs", h.listPrograms(false))
	s.app.Post("/api/programs", s.Idempotent(h.createProgram))
	s.app.Get("/api/programs/:id", h.getProgram)
	s.app.Patch("/api/programs/:id", h.updateProgram)
	s.app.Get("/api/programs/:id/promotions", h.listProgramPromotions)
	s.app.Post("/api/programs/:id/promotions", s.Idempotent(h.createPromotion))
	s.app.Patch("/api/promotions/:id", h.updatePromotion)
}

type programHandlers struct{ svc ProgramService }

func (h programHandlers) listPrograms(partnered bool) fiber.Handler {
	return func(c *fiber.Ctx) error {
		p, err := PageRequest(c)
		if err != nil {
			return err
		}
		list, next, err := h.svc.ListPrograms(c.UserContext(), programsActor(c), programs.ProgramFilter{
			Status: c.Query("status"), Partnered: partnered, Query: c.Query("q"), Category: c.Query("category"),
		}, p)
		return programsList(c, list, next, err)
	}
}

func (h programHandlers) getProgram(c *fiber.Ctx) error {
	p, err := h.svc.Program(c.UserContext(), programsActor(c), c.Params("id"))
	return programsJSON(c, fiber.StatusOK, p, err)
}

func (h programHandlers) createProgram(c *fiber.Ctx) error {
	var in programs.ProgramInput
	if err := DecodeJSON(c, &in); err != nil {
		return err
	}
	p, err := h.svc.CreateProgram(c.UserContext(), programsActor(c), in)
	return programsJSON(c, fiber.StatusCreated, p, err)
}

func (h programHandlers) updateProgram(c *fiber.Ctx) error {
	var in programs.ProgramPatch
	if err := DecodeJSON(c, &in); err != nil {
		return err
	}
	p, err := h.svc.UpdateProgram(c.UserContext(), programsActor(c), c.Params("id"), in)
	return programsJSON(c, fiber.StatusOK, p, err)
}

// listPromotions lists the promotions of the program_id query parameter (all when absent).
func (h programHandlers) listPromotions(c *fiber.Ctx) error {
	return h.promotions(c, c.Query("program_id"))
}

// listProgramPromotions lists the promotions of the program in the path.
func (h programHandlers) listProgramPromotions(c *fiber.Ctx) error {
	return h.promotions(c, c.Params("id"))
}

func (h programHandlers) promotions(c *fiber.Ctx, programID string) error {
	p, err := PageRequest(c)
	if err != nil {
		return err
	}
	active, err := queryBool(c, "active")
	if err != nil {
		return err
	}
	list, next, err := h.svc.ListPromotions(c.UserContext(), programsActor(c), programs.PromotionFilter{ProgramID: programID, Active: active}, p)
	return programsList(c, list, next, err)
}

func (h programHandlers) createPromotion(c *fiber.Ctx) error {
	var in programs.PromotionInput
	if err := DecodeJSON(c, &in); err != nil {
		return err
	}
	p, err := h.svc.CreatePromotion(c.UserContext(), programsActor(c), c.Params("id"), in)
	return programsJSON(c, fiber.StatusCreated, p, err)
}

func (h programHandlers) updatePromotion(c *fiber.Ctx) error {
	var in programs.PromotionPatch
	if err := DecodeJSON(c, &in); err != nil {
		return err
	}
	p, err := h.svc.UpdatePromotion(c.UserContext(), programsActor(c), c.Params("id"), in)
	return programsJSON(c, fiber.StatusOK, p, err)
}

// programsActor is the caller as the programs domain knows it.
func programsActor(c *fiber.Ctx) programs.Actor {
	p := Caller(c)
	return programs.Actor{CompanyID: p.CompanyID, Kind: p.CompanyKind, Role: p.Role}
}

// programsJSON writes v with status, or the problem of a domain error.
func programsJSON(c *fiber.Ctx, status int, v any, err error) error {
	if err != nil {
		return programsProblem(err)
	}
	return c.Status(status).JSON(v)
}

func programsList[T any](c *fiber.Ctx, list []T, next string, err error) error {
	if err != nil {
		return programsProblem(err)
	}
	return c.JSON(page.List[T]{Data: nonNil(list), NextCursor: next})
}

// programsProblem maps the programs domain's errors to problems; others stay 500s.
func programsProblem(err error) error {
	var (
		invalid    *programs.ValidationError
		notFound   *programs.NotFoundError
		forbidden  *programs.ForbiddenError
		transition *programs.TransitionError
		conflict   *programs.ConflictError
	)
	switch {
	case errors.As(err, &invalid):
		fields := make([]FieldError, len(invalid.Fields))
		for i, f := range invalid.Fields {
			fields[i] = FieldError{Field: f.Field, Message: f.Message}
		}
		return Invalid(fields...)
	case errors.As(err, &notFound):
		return NewProblem(fiber.StatusNotFound, "not_found", notFound.Error())
	case errors.As(err, &forbidden):
		return NewProblem(fiber.StatusForbidden, "forbidden", forbidden.Error())
	case errors.As(err, &transition):
		return NewProblem(fiber.StatusConflict, "invalid_transition", transition.Error()).
			With("current_status", transition.From).With("allowed", transition.Allowed)
	case errors.As(err, &conflict):
		return NewProblem(fiber.StatusConflict, conflict.Field+"_taken", conflict.Error())
	}
	return err
}
