package httpapi

import (
	"context"
	"errors"
	"fmt"

	"github.com/gofiber/fiber/v2"

	"github.com/partnerstream/partnerstream/internal/ids"
	"github.com/partnerstream/partnerstream/internal/links"
	"github.com/partnerstream/partnerstream/internal/page"
)

// LinkService is what the tracking-link routes need; *links.Service is one.
type LinkService interface {
	Create(ctx context.Context, companyID, companyKind string, in links.NewLink) (links.Link, error)
	List(ctx context.Context, companyID, companyKind string, f links.Filter, p page.Request) ([]links.Link, string, error)
	SetStatus(ctx context.Context, companyID, companyKind, linkID, status string) (links.Link, error)
}

// TrackingOptions configure MountTracking.
type TrackingOptions struct {
	// SecureCookies marks the visitor and click cookies Secure; set it when the public base
	// URL is https.
	SecureCookies bool
}

// MountTracking adds the tracking-link routes of the API (/api/v1) and the dashboard (/api),
// and the public click redirect GET /c/{code}.
func (s *Server) MountTracking(svc LinkService, clicks Clicker, o TrackingOptions) {
	h := linkHandlers{svc: svc}
	for _, prefix := range []string{"/api/v1/tracking-links", "/api/tracking-links"} {
		s.app.Get(prefix, h.list)
		s.app.Post(prefix, s.Idempotent(h.create))
		s.app.Post(prefix+"/:id/pause", h.setStatus(links.Paused))
		s.app.Post(prefix+"/:id/resume", h.setStatus(links.Active))
	}
	s.mountRedirect(clicks, o)
}

type linkHandlers struct{ svc LinkService }

type newLinkRequest struct {
	ProgramID      string `json:"program_id"`
	PromotionID    string `json:"promotion_id"`
	DestinationURL string `json:"destination_url"`
	Sub1           string `json:"sub1"`
	Sub2           string `json:"sub2"`
	Sub3           string `json:"sub3"`
	Sub4           string `json:"sub4"`
	Sub5           string `json:"sub5"`
}

func (h linkHandlers) create(c *fiber.Ctx) error {
	var in newLinkRequest
	if err := DecodeJSON(c, &in); err != nil {
		return err
	}
	p := Caller(c)
	l, err := h.svc.Create(c.UserContext(), p.CompanyID, p.CompanyKind, links.NewLink{
		ProgramID: in.ProgramID, PromotionID: in.PromotionID, DestinationURL: in.DestinationURL,
		Subs: [5]string{in.Sub1, in.Sub2, in.Sub3, in.Sub4, in.Sub5},
	})
	if err != nil {
		return linkProblem(err)
	}
	c.Location(l.URL)
	return c.Status(fiber.StatusCreated).JSON(l)
}

func (h linkHandlers) list(c *fiber.Ctx) error {
	pr, err := PageRequest(c)
	if err != nil {
		return err
	}
	f := links.Filter{ProgramID: c.Query("program_id")}
	if f.ProgramID != "" && !ids.Valid(ids.Program, f.ProgramID) {
		return Invalid(FieldError{Field: "program_id", Message: "must be a program id (prg_...)"})
	}
	p := Caller(c)
	out, next, err := h.svc.List(c.UserContext(), p.CompanyID, p.CompanyKind, f, pr)
	if err != nil {
		return err
	}
	return c.JSON(page.List[links.Link]{Data: nonNil(out), NextCursor: next})
}

func (h linkHandlers) setStatus(status string) fiber.Handler {
	return func(c *fiber.Ctx) error {
		p := Caller(c)
		l, err := h.svc.SetStatus(c.UserContext(), p.CompanyID, p.CompanyKind, c.Params("id"), status)
		if err != nil {
			return linkProblem(err)
		}
		return c.JSON(l)
	}
}

// linkProblem maps the links service's errors to problems; anything else is a 500.
func linkProblem(err error) error {
	var ve *links.ValidationError
	var na *links.NotApprovedError
	switch {
	case errors.As(err, &ve):
		fields := make([]FieldError, len(ve.Fields))
		for i, f := range ve.Fields {
			fields[i] = FieldError{Field: f.Field, Message: f.Message}
		}
		return Invalid(fields...)
	case errors.As(err, &na):
		return NewProblem(fiber.StatusForbidden, "partnership_not_approved",
			fmt.Sprintf("tracking links need an approved partnership with the program; yours is %s", na.Status)).
			With("partnership_status", na.Status)
	case errors.Is(err, links.ErrProgramNotFound):
		return NewProblem(fiber.StatusNotFound, "not_found", "no such program")
	case errors.Is(err, links.ErrProgramNotActive):
		return NewProblem(fiber.StatusConflict, "program_not_active", "the program is paused or archived and takes no new tracking links")
	case errors.Is(err, links.ErrAffiliatesOnly):
		return NewProblem(fiber.StatusForbidden, "affiliates_only", "only affiliates create, pause and resume tracking links; advertisers can list the links of their programs")
	case errors.Is(err, links.ErrNotFound):
		return NewProblem(fiber.StatusNotFound, "not_found", "no such tracking link")
	}
	return err
}
