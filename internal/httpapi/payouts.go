package httpapi

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/partnerstream/partnerstream/internal/conversions"
	"github.com/partnerstream/partnerstream/internal/ids"
	"github.com/partnerstream/partnerstream/internal/money"
	"github.com/partnerstream/partnerstream/internal/page"
)

// PayoutService is what the payout routes need (conversions.Service).
type PayoutService interface {
	CreatePayout(ctx context.Context, advertiserID string, in conversions.NewPayout) (conversions.Payout, error)
	SettlePayout(ctx context.Context, advertiserID, payoutID, to string) (conversions.Payout, error)
	Payout(ctx context.Context, v conversions.Viewer, id string) (conversions.Payout, error)
	Payouts(ctx context.Context, v conversions.Viewer, f conversions.PayoutFilter, p page.Request) ([]conversions.Payout, string, error)
}

// MountPayouts adds the dashboard's payout routes: the advertiser gathers an affiliate's
// approved commissions into a payout and settles it; both companies read theirs.
func (s *Server) MountPayouts(svc PayoutService) {
	h := payoutHandlers{svc: svc}
	s.app.Get("/api/payouts", h.list)
	s.app.Post("/api/payouts", advertiserOnly, s.Idempotent(h.create))
	s.app.Get("/api/payouts/:id", h.get)
	for action, to := range map[string]string{"paid": conversions.PayoutPaid, "failed": conversions.PayoutFailed, "cancel": conversions.PayoutCanceled} {
		s.app.Post("/api/payouts/:id/"+action, advertiserOnly, s.Idempotent(h.settle(to)))
	}
}

type payoutHandlers struct{ svc PayoutService }

func (h payoutHandlers) list(c *fiber.Ctx) error {
	p, err := PageRequest(c)
	if err != nil {
		return err
	}
	f, err := payoutFilter(c)
	if err != nil {
		return err
	}
	list, next, err := h.svc.Payouts(c.UserContext(), conversionsViewer(c), f, p)
	if err != nil {
		return conversionsProblem(c, err)
	}
	out := make([]payoutJSON, len(list))
	for i, p := range list {
		out[i] = payoutView(p)
	}
	return c.JSON(page.List[payoutJSON]{Data: out, NextCursor: next})
}

// payoutFilter reads the filters of the payout list and export.
func payoutFilter(c *fiber.Ctx) (conversions.PayoutFilter, error) {
	f := conversions.PayoutFilter{Status: c.Query("status"), AffiliateID: c.Query("affiliate_id")}
	if f.Status != "" && !slices.Contains(conversions.PayoutStatuses, f.Status) {
		return f, Invalid(FieldError{Field: "status", Message: "must be one of " + strings.Join(conversions.PayoutStatuses, ", ")})
	}
	if f.AffiliateID != "" && !ids.Valid(ids.Company, f.AffiliateID) {
		return f, Invalid(FieldError{Field: "affiliate_id", Message: "must be an id starting with co_"})
	}
	return f, nil
}

func (h payoutHandlers) create(c *fiber.Ctx) error {
	var in struct {
		AffiliateID string `json:"affiliate_id"`
		Currency    string `json:"currency"`
		PeriodStart string `json:"period_start"`
		PeriodEnd   string `json:"period_end"`
	}
	if err := DecodeJSON(c, &in); err != nil {
		return err
	}
	start, err := parseTime("period_start", in.PeriodStart, true)
	if err != nil {
		return err
	}
	end, err := parseTime("period_end", in.PeriodEnd, true)
	if err != nil {
		return err
	}
	p, err := h.svc.CreatePayout(c.UserContext(), Caller(c).CompanyID, conversions.NewPayout{AffiliateID: in.AffiliateID,
		Currency: in.Currency, PeriodStart: start, PeriodEnd: end})
	if err != nil {
		return conversionsProblem(c, err)
	}
	c.Location("/api/payouts/" + p.ID)
	return c.Status(fiber.StatusCreated).JSON(payoutView(p))
}

func (h payoutHandlers) get(c *fiber.Ctx) error {
	id := c.Params("id")
	if !ids.Valid(ids.Payout, id) {
		return errNoPayout
	}
	p, err := h.svc.Payout(c.UserContext(), conversionsViewer(c), id)
	if err != nil {
		return conversionsProblem(c, err)
	}
	return c.JSON(payoutView(p))
}

func (h payoutHandlers) settle(to string) fiber.Handler {
	return func(c *fiber.Ctx) error {
		id := c.Params("id")
		if !ids.Valid(ids.Payout, id) {
			return errNoPayout
		}
		p, err := h.svc.SettlePayout(c.UserContext(), Caller(c).CompanyID, id, to)
		if err != nil {
			return conversionsProblem(c, err)
		}
		return c.JSON(payoutView(p))
	}
}

var errNoPayout = NewProblem(fiber.StatusNotFound, "not_found", "no such payout")

// payoutJSON is a payout as the API shows it.
type payoutJSON struct {
	ID              string    `json:"id"`
	AdvertiserID    string    `json:"advertiser_id"`
	AffiliateID     string    `json:"affiliate_id"`
	AdvertiserName  string    `json:"advertiser_name"`
	AffiliateName   string    `json:"affiliate_name"`
	Currency        string    `json:"currency"`
	Amount          string    `json:"amount"`
	CommissionCount int       `json:"commission_count"`
	PeriodStart     time.Time `json:"period_start"`
	PeriodEnd       time.Time `json:"period_end"`
	Status          string    `json:"status"`
	CreatedAt       time.Time `json:"created_at"`
	UpdatedAt       time.Time `json:"updated_at"`
}

func payoutView(p conversions.Payout) payoutJSON {
	return payoutJSON{ID: p.ID, AdvertiserID: p.AdvertiserID, AffiliateID: p.AffiliateID, Currency: p.Currency,
		AdvertiserName: p.AdvertiserName, AffiliateName: p.AffiliateName, Amount: money.Format(p.Amount, p.Currency), CommissionCount: p.CommissionCount, PeriodStart: p.PeriodStart,
		PeriodEnd: p.PeriodEnd, Status: p.Status, CreatedAt: p.CreatedAt, UpdatedAt: p.UpdatedAt}
}
