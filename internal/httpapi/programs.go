package httpapi

import (
	"context"
	"errors"
	"strconv"

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
	// The partner API lists only the caller's programs (partnered); the catalogue an
	// affiliate browses to find new ones is /api/v1/programs.
	listing := func(partnered bool) fiber.Handler {
		return func(c *fiber.Ctx) error {
			p, err := PageRequest(c)
			if err != nil {
				return err
			}
			list, next, err := svc.ListPrograms(c.UserContext(), programsActor(c), programs.ProgramFilter{Status: c.Query("status"), Partnered: partnered}, p)
			return programsList(c, list, next, err)
		}
	}
	listPrograms := listing(false)
	getProgram := func(c *fiber.Ctx) error {
		p, err := svc.Program(c.UserContext(), programsActor(c), c.Params("id"))
		return programsJSON(c, fiber.StatusOK, p, err)
	}
	listPromotions := func(programID func(c *fiber.Ctx) string) fiber.Handler {
		return func(c *fiber.Ctx) error {
			p, err := PageRequest(c)
			if err != nil {
				return err
			}
			active, err := programsBool(c, "active")
			if err != nil {
				return err
			}
			list, next, err := svc.ListPromotions(c.UserContext(), programsActor(c), programs.PromotionFilter{ProgramID: programID(c), Active: active}, p)
			return programsList(c, list, next, err)
		}
	}

	s.app.Get("/api/v1/programs", listPrograms)
	s.app.Get("/api/v1/programs/:id", getProgram)
	s.app.Get("/api/v1/promotions", listPromotions(func(c *fiber.Ctx) string { return c.Query("program_id") }))
	s.app.Get("/api/partner-api/programs", listing(true))

	s.app.Get("/api/programs", listPrograms)
	s.app.Post("/api/programs", s.Idempotent(func(c *fiber.Ctx) error {
		var in programs.ProgramInput
		if err := DecodeJSON(c, &in); err != nil {
			return err
		}
		p, err := svc.CreateProgram(c.UserContext(), programsActor(c), in)
		return programsJSON(c, fiber.StatusCreated, p, err)
	}))
	s.app.Get("/api/programs/:id", getProgram)
	s.app.Patch("/api/programs/:id", func(c *fiber.Ctx) error {
		var in programs.ProgramPatch
		if err := DecodeJSON(c, &in); err != nil {
			return err
		}
		p, err := svc.UpdateProgram(c.UserContext(), programsActor(c), c.Params("id"), in)
		return programsJSON(c, fiber.StatusOK, p, err)
	})
	s.app.Get("/api/programs/:id/promotions", listPromotions(func(c *fiber.Ctx) string { return c.Params("id") }))
	s.app.Post("/api/programs/:id/promotions", s.Idempotent(func(c *fiber.Ctx) error {
		var in programs.PromotionInput
		if err := DecodeJSON(c, &in); err != nil {
			return err
		}
		p, err := svc.CreatePromotion(c.UserContext(), programsActor(c), c.Params("id"), in)
		return programsJSON(c, fiber.StatusCreated, p, err)
	}))
	s.app.Patch("/api/promotions/:id", func(c *fiber.Ctx) error {
		var in programs.PromotionPatch
		if err := DecodeJSON(c, &in); err != nil {
			return err
		}
		p, err := svc.UpdatePromotion(c.UserContext(), programsActor(c), c.Params("id"), in)
		return programsJSON(c, fiber.StatusOK, p, err)
	})
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
	}
	return err
}

// programsBool reads an optional true/false query parameter.
func programsBool(c *fiber.Ctx, name string) (bool, error) {
	v := c.Query(name)
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, Invalid(FieldError{Field: name, Message: "must be true or false"})
	}
	return b, nil
}
