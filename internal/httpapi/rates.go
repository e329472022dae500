package httpapi

import (
	"bytes"
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/partnerstream/partnerstream/internal/identity"
	"github.com/partnerstream/partnerstream/internal/ids"
	"github.com/partnerstream/partnerstream/internal/money"
	"github.com/partnerstream/partnerstream/internal/page"
	"github.com/partnerstream/partnerstream/internal/rates"
)

// RateService is what the exchange-rate routes need (rates.Service).
type RateService interface {
	Set(ctx context.Context, companyID string, in rates.NewRate) (rates.Rate, error)
	Import(ctx context.Context, companyID string, r io.Reader) (int, error)
	List(ctx context.Context, companyID string, f rates.Filter, p page.Request) ([]rates.Rate, string, error)
}

// RatesOptions configure the exchange-rate routes.
type RatesOptions struct {
	// Operators are the companies whose owners and admins run the platform: they keep the
	// rates of any company, named with company_id.
	Operators []string
}

// MountRates adds the dashboard's exchange-rate routes: an advertiser keeps its own rates,
// an operator any company's. Members read; owners and admins write.
func (s *Server) MountRates(svc RateService, o RatesOptions) {
	h := rateHandlers{svc: svc, operators: o.Operators}
	s.app.Get("/api/rates", h.target, h.list)
	s.app.Put("/api/rates", h.target, requireAdminTo("set exchange rates"), s.Idempotent(h.set))
	s.app.Post("/api/rates/import", h.target, requireAdminTo("upload exchange rates"), s.Idempotent(h.upload))
}

type rateHandlers struct {
	svc       RateService
	operators []string
}

const rateCompanyKey = "rate_company"

// target decides whose rates the request reads or writes: the caller's own when it is an
// advertiser, or with company_id any company's when the caller is an operator.
func (h rateHandlers) target(c *fiber.Ctx) error {
	p := Caller(c)
	company := c.Query("company_id")
	operator := slices.Contains(h.operators, p.CompanyID)
	switch {
	case company != "" && !operator:
		return NewProblem(fiber.StatusForbidden, "operator_only", "only the operator keeps the rates of other companies: leave company_id out")
	case company != "" && !ids.Valid(ids.Company, company):
		return Invalid(FieldError{Field: "company_id", Message: "must be an id starting with co_"})
	case company == "" && p.CompanyKind != identity.Advertiser && !operator:
		return NewProblem(fiber.StatusForbidden, "advertiser_only", "exchange rates convert an advertiser's conversions: only advertisers keep them")
	case company == "":
		company = p.CompanyID
	}
	c.Locals(rateCompanyKey, company)
	return c.Next()
}

func rateCompany(c *fiber.Ctx) string {
	id, _ := c.Locals(rateCompanyKey).(string)
	return id
}

func (h rateHandlers) list(c *fiber.Ctx) error {
	p, err := PageRequest(c)
	if err != nil {
		return err
	}
	f := rates.Filter{Base: c.Query("base"), Quote: c.Query("quote")}
	var errs []FieldError
	for _, q := range []struct{ name, v string }{{"base", f.Base}, {"quote", f.Quote}} {
		if q.v != "" && !money.ValidCurrency(q.v) {
			errs = append(errs, FieldError{Field: q.name, Message: "must be an ISO 4217 code in upper case"})
		}
	}
	for _, q := range []struct {
		name string
		dst  *time.Time
	}{{"from", &f.From}, {"to", &f.To}} {
		if v := c.Query(q.name); v != "" {
			d, err := time.Parse(time.DateOnly, v)
			if err != nil {
				errs = append(errs, FieldError{Field: q.name, Message: "must be a date such as 2026-03-14"})
			}
			*q.dst = d
		}
	}
	if errs != nil {
		return Invalid(errs...)
	}
	list, next, err := h.svc.List(c.UserContext(), rateCompany(c), f, p)
	if errors.Is(err, page.ErrBadCursor) {
		return NewProblem(fiber.StatusBadRequest, "invalid_cursor", err.Error()+"; start again without it")
	}
	if err != nil {
		return err
	}
	out := make([]rateJSON, len(list))
	for i, r := range list {
		out[i] = rateView(r)
	}
	return c.JSON(page.List[rateJSON]{Data: out, NextCursor: next})
}

func (h rateHandlers) set(c *fiber.Ctx) error {
	var in struct {
		Date  string `json:"date"`
		Base  string `json:"base"`
		Quote string `json:"quote"`
		Rate  string `json:"rate"`
	}
	if err := DecodeJSON(c, &in); err != nil {
		return err
	}
	r, err := h.svc.Set(c.UserContext(), rateCompany(c), rates.NewRate{Day: in.Date, Base: in.Base, Quote: in.Quote, Rate: in.Rate})
	if err != nil {
		return rateProblem(err)
	}
	return c.JSON(rateView(r))
}

func (h rateHandlers) upload(c *fiber.Ctx) error {
	if ct := string(c.Request().Header.ContentType()); !strings.HasPrefix(ct, "text/csv") {
		return NewProblem(fiber.StatusUnsupportedMediaType, "unsupported_media_type", "send the rates as text/csv with the header date,base,quote,rate")
	}
	n, err := h.svc.Import(c.UserContext(), rateCompany(c), bytes.NewReader(c.Body()))
	if err != nil {
		return rateProblem(err)
	}
	return c.JSON(fiber.Map{"imported": n})
}

// rateProblem maps the rates errors to problems.
func rateProblem(err error) error {
	var inv *rates.InvalidError
	var imp *rates.ImportError
	var pgErr *pgconn.PgError
	switch {
	case errors.As(err, &inv):
		return Invalid(fieldErrors(inv.Errors)...)
	case errors.As(err, &imp):
		lines := make([]lineErrorJSON, len(imp.Lines))
		for i, l := range imp.Lines {
			lines[i] = lineErrorJSON{Line: l.Line, Errors: fieldErrors(l.Errors)}
		}
		return NewProblem(fiber.StatusUnprocessableEntity, "invalid_rates", imp.Error()+"; nothing was stored").With("lines", lines)
	case errors.As(err, &pgErr) && pgErr.Code == "23503":
		// the operator named a company that does not exist
		return NewProblem(fiber.StatusNotFound, "not_found", "no such company")
	}
	return err
}

func fieldErrors(in []rates.FieldError) []FieldError {
	out := make([]FieldError, len(in))
	for i, f := range in {
		out[i] = FieldError{Field: f.Field, Code: FieldCode(f.Message), Message: f.Message}
	}
	return out
}

type lineErrorJSON struct {
	Line   int          `json:"line"`
	Errors []FieldError `json:"errors"`
}

// rateJSON is a rate as the API shows it: the rate is a decimal string, never a float.
type rateJSON struct {
	CompanyID string    `json:"company_id"`
	Date      string    `json:"date"`
	Base      string    `json:"base"`
	Quote     string    `json:"quote"`
	Rate      string    `json:"rate"`
	UpdatedAt time.Time `json:"updated_at"`
}

func rateView(r rates.Rate) rateJSON {
	return rateJSON{CompanyID: r.CompanyID, Date: r.Day.Format(time.DateOnly), Base: r.Base, Quote: r.Quote, Rate: r.Rate, UpdatedAt: r.UpdatedAt}
}
