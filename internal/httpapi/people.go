package httpapi

import (
	"context"
	"errors"

	"github.com/gofiber/fiber/v2"

	"github.com/partnerstream/partnerstream/internal/page"
	"github.com/partnerstream/partnerstream/internal/people"
	"github.com/partnerstream/partnerstream/internal/programs"
)

// PeopleService is what the team and invitation routes need (people.Service).
type PeopleService interface {
	Members(ctx context.Context, a people.Actor) ([]people.Member, error)
	SetRole(ctx context.Context, a people.Actor, userID, role string) (people.Member, error)
	RemoveMember(ctx context.Context, a people.Actor, userID string) error
	TeamInvitations(ctx context.Context, a people.Actor) ([]people.TeamInvitation, error)
	InviteMember(ctx context.Context, a people.Actor, in people.TeamInvite) (people.TeamInvitation, error)
	RevokeTeamInvitation(ctx context.Context, a people.Actor, id string) error
	ProgramInvitations(ctx context.Context, a people.Actor, programID string) ([]people.AffiliateInvitation, error)
	InviteAffiliate(ctx context.Context, a people.Actor, programID string, in people.AffiliateInvite) (people.AffiliateInvitation, error)
	RevokeAffiliateInvitation(ctx context.Context, a people.Actor, id string) error
	MyInvitations(ctx context.Context, a people.Actor) ([]people.AffiliateInvitation, error)
	AcceptAffiliateInvitation(ctx context.Context, a people.Actor, id string) (programs.Partnership, error)
}

// MountPeople adds the dashboard's team routes (members, roles, invitations) and the
// invitations of affiliates to programs. They take a session: people are a dashboard
// matter, not an API key's.
func (s *Server) MountPeople(svc PeopleService) {
	h := peopleHandlers{svc: svc}
	s.app.Get("/api/team/members", h.members)
	s.app.Patch("/api/team/members/:id", h.setRole)
	s.app.Delete("/api/team/members/:id", h.remove)
	s.app.Get("/api/team/invitations", h.teamInvitations)
	s.app.Post("/api/team/invitations", s.Idempotent(h.inviteMember))
	s.app.Delete("/api/team/invitations/:id", h.revokeTeamInvitation)
	s.app.Get("/api/programs/:id/invitations", h.programInvitations)
	s.app.Post("/api/programs/:id/invitations", s.Idempotent(h.inviteAffiliate))
	s.app.Delete("/api/affiliate-invitations/:id", h.revokeAffiliateInvitation)
	s.app.Get("/api/affiliate-invitations", h.myInvitations)
	s.app.Post("/api/affiliate-invitations/:id/accept", h.accept)
}

type peopleHandlers struct{ svc PeopleService }

func peopleActor(c *fiber.Ctx) people.Actor {
	p := Caller(c)
	return people.Actor{UserID: p.UserID, CompanyID: p.CompanyID, Kind: p.CompanyKind, Role: p.Role, Locale: p.Locale}
}

func (h peopleHandlers) members(c *fiber.Ctx) error {
	list, err := h.svc.Members(c.UserContext(), peopleActor(c))
	return peopleList(c, list, err)
}

func (h peopleHandlers) setRole(c *fiber.Ctx) error {
	var in struct {
		Role string `json:"role"`
	}
	if err := DecodeJSON(c, &in); err != nil {
		return err
	}
	m, err := h.svc.SetRole(c.UserContext(), peopleActor(c), c.Params("id"), in.Role)
	return peopleJSON(c, fiber.StatusOK, m, err)
}

func (h peopleHandlers) remove(c *fiber.Ctx) error {
	return peopleNoContent(c, h.svc.RemoveMember(c.UserContext(), peopleActor(c), c.Params("id")))
}

func (h peopleHandlers) teamInvitations(c *fiber.Ctx) error {
	list, err := h.svc.TeamInvitations(c.UserContext(), peopleActor(c))
	return peopleList(c, list, err)
}

func (h peopleHandlers) inviteMember(c *fiber.Ctx) error {
	var in people.TeamInvite
	if err := DecodeJSON(c, &in); err != nil {
		return err
	}
	if err := checkMailLocale(in.Locale); err != nil {
		return err
	}
	inv, err := h.svc.InviteMember(c.UserContext(), peopleActor(c), in)
	return peopleJSON(c, fiber.StatusCreated, inv, err)
}

func (h peopleHandlers) revokeTeamInvitation(c *fiber.Ctx) error {
	return peopleNoContent(c, h.svc.RevokeTeamInvitation(c.UserContext(), peopleActor(c), c.Params("id")))
}

func (h peopleHandlers) programInvitations(c *fiber.Ctx) error {
	list, err := h.svc.ProgramInvitations(c.UserContext(), peopleActor(c), c.Params("id"))
	return peopleList(c, list, err)
}

func (h peopleHandlers) inviteAffiliate(c *fiber.Ctx) error {
	var in people.AffiliateInvite
	if err := DecodeJSON(c, &in); err != nil {
		return err
	}
	if err := checkMailLocale(in.Locale); err != nil {
		return err
	}
	inv, err := h.svc.InviteAffiliate(c.UserContext(), peopleActor(c), c.Params("id"), in)
	return peopleJSON(c, fiber.StatusCreated, inv, err)
}

func (h peopleHandlers) revokeAffiliateInvitation(c *fiber.Ctx) error {
	return peopleNoContent(c, h.svc.RevokeAffiliateInvitation(c.UserContext(), peopleActor(c), c.Params("id")))
}

func (h peopleHandlers) myInvitations(c *fiber.Ctx) error {
	list, err := h.svc.MyInvitations(c.UserContext(), peopleActor(c))
	return peopleList(c, list, err)
}

func (h peopleHandlers) accept(c *fiber.Ctx) error {
	p, err := h.svc.AcceptAffiliateInvitation(c.UserContext(), peopleActor(c), c.Params("id"))
	return peopleJSON(c, fiber.StatusOK, p, err)
}

// checkMailLocale checks the language asked for an invitation's e-mail: one of the
// dashboard's, or empty for the inviter's.
func checkMailLocale(locale string) error {
	if locale != "" && !accountLocales[locale] {
		return Invalid(FieldError{Field: "locale", Message: "must be en or es"})
	}
	return nil
}

func peopleList[T any](c *fiber.Ctx, list []T, err error) error {
	if err != nil {
		return peopleProblem(err)
	}
	return c.JSON(page.List[T]{Data: nonNil(list)})
}

func peopleJSON(c *fiber.Ctx, status int, v any, err error) error {
	if err != nil {
		return peopleProblem(err)
	}
	return c.Status(status).JSON(v)
}

func peopleNoContent(c *fiber.Ctx, err error) error {
	if err != nil {
		return peopleProblem(err)
	}
	return c.SendStatus(fiber.StatusNoContent)
}

// peopleProblem maps the people domain's errors to problems; others stay 500s.
func peopleProblem(err error) error {
	var (
		field     *people.FieldError
		notFound  *people.NotFoundError
		forbidden *people.ForbiddenError
		conflict  *people.ConflictError
	)
	switch {
	case errors.As(err, &field):
		return Invalid(FieldError{Field: field.Field, Message: field.Message})
	case errors.As(err, &notFound):
		return NewProblem(fiber.StatusNotFound, "not_found", notFound.Error())
	case errors.As(err, &forbidden):
		return NewProblem(fiber.StatusForbidden, "forbidden", forbidden.Error())
	case errors.As(err, &conflict):
		return NewProblem(fiber.StatusConflict, conflict.Code, conflict.Error())
	case errors.Is(err, people.ErrMailNotSent):
		return NewProblem(fiber.StatusBadGateway, "email_not_sent", people.ErrMailNotSent.Error())
	}
	return programsProblem(err)
}
