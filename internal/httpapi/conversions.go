package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/partnerstream/partnerstream/internal/conversions"
	"github.com/partnerstream/partnerstream/internal/identity"
	"github.com/partnerstream/partnerstream/internal/ids"
	"github.com/partnerstream/partnerstream/internal/money"
	"github.com/partnerstream/partnerstream/internal/page"
	"github.com/partnerstream/partnerstream/internal/rates"
)

// ConversionService is what the conversion and commission routes need (conversions.Service).
type ConversionService interface {
	Register(ctx context.Context, advertiserID string, in conversions.NewConversion) (conversions.Conversion, bool, error)
	Get(ctx context.Context, v conversions.Viewer, id string) (conversions.Conversion, error)
	List(ctx context.Context, v conversions.Viewer, f conversions.Filter, p page.Request) ([]conversions.Conversion, string, error)
	Commissions(ctx context.Context, v conversions.Viewer, f conversions.Filter, p page.Request) ([]conversions.Commission, string, error)
	ChangeStatus(ctx context.Context, advertiserID, conversionID, to, reason string) (conversions.Conversion, error)
	ApproveMany(ctx context.Context, advertiserID string, conversionIDs []string) ([]conversions.Conversion, error)
	RejectMany(ctx context.Context, advertiserID string, conversionIDs []string, reason string) ([]conversions.Conversion, error)
	Release(ctx context.Context, advertiserID string, conversionIDs []string) ([]conversions.Conversion, error)
}

// MountConversions adds the conversion and commission routes: registering, reading and
// deciding in /api/v1, reading commissions in the partner API, and the dashboard's lists and
// decisions (with bulk approval and rejection). Advertisers see their programs' conversions; affiliates
// see their own (without the advertiser's metadata).
func (s *Server) MountConversions(svc ConversionService) {
	h := conversionHandlers{svc: svc}
	s.app.Post("/api/v1/conversions", advertiserOnly, s.Idempotent(h.register))
	s.app.Get("/api/v1/conversions", h.list)
	s.app.Get("/api/v1/conversions/:id", h.get)
	s.app.Get("/api/v1/commissions", h.commissions)
	s.app.Get("/api/partner-api/commissions", h.commissions)
	s.app.Get("/api/conversions", h.list)
	s.app.Post("/api/conversions", advertiserOnly, s.Idempotent(h.register))
	s.app.Get("/api/conversions/:id", h.get)
	s.app.Get("/api/commissions", h.commissions)
	s.app.Post("/api/conversions/approve", advertiserOnly, s.Idempotent(h.bulkIDs(ConversionService.ApproveMany)))
	s.app.Post("/api/conversions/reject", advertiserOnly, s.Idempotent(h.rejectMany))
	s.app.Post("/api/conversions/release", advertiserOnly, s.Idempotent(h.bulkIDs(ConversionService.Release)))
	for action, to := range map[string]string{"approve": conversions.Approved, "reject": conversions.Rejected, "reverse": conversions.Reversed} {
		s.app.Post("/api/v1/conversions/:id/"+action, advertiserOnly, s.Idempotent(h.changeStatus(to)))
		s.app.Post("/api/conversions/:id/"+action, advertiserOnly, s.Idempotent(h.changeStatus(to)))
	}
}

type conversionHandlers struct{ svc ConversionService }

func (h conversionHandlers) register(c *fiber.Ctx) error {
	var in conversionInput
	if err := DecodeJSON(c, &in); err != nil {
		return err
	}
	nc, err := in.toNew()
	if err != nil {
		return err
	}
	conv, created, err := h.svc.Register(c.UserContext(), Caller(c).CompanyID, nc)
	if err != nil {
		return conversionsProblem(c, err)
	}
	status := fiber.StatusOK
	if created {
		status = fiber.StatusCreated
	}
	c.Location("/api/v1/conversions/" + conv.ID)
	return c.Status(status).JSON(conversionView(conv, true))
}

func (h conversionHandlers) list(c *fiber.Ctx) error {
	f, p, err := conversionsQuery(c)
	if err != nil {
		return err
	}
	v := conversionsViewer(c)
	list, next, err := h.svc.List(c.UserContext(), v, f, p)
	if err != nil {
		return conversionsProblem(c, err)
	}
	out := make([]conversionJSON, len(list))
	for i, conv := range list {
		out[i] = conversionView(conv, !v.Affiliate)
	}
	return c.JSON(page.List[conversionJSON]{Data: out, NextCursor: next})
}

func (h conversionHandlers) get(c *fiber.Ctx) error {
	id := c.Params("id")
	if !ids.Valid(ids.Conversion, id) {
		return errNoConversion
	}
	v := conversionsViewer(c)
	conv, err := h.svc.Get(c.UserContext(), v, id)
	if err != nil {
		return conversionsProblem(c, err)
	}
	return c.JSON(conversionView(conv, !v.Affiliate))
}

var errNoConversion = NewProblem(fiber.StatusNotFound, "not_found", "no such conversion")

func (h conversionHandlers) commissions(c *fiber.Ctx) error {
	f, p, err := conversionsQuery(c)
	if err != nil {
		return err
	}
	list, next, err := h.svc.Commissions(c.UserContext(), conversionsViewer(c), f, p)
	if err != nil {
		return conversionsProblem(c, err)
	}
	out := make([]commissionJSON, len(list))
	for i, m := range list {
		out[i] = commissionView(m)
	}
	return c.JSON(page.List[commissionJSON]{Data: out, NextCursor: next})
}

func (h conversionHandlers) changeStatus(to string) fiber.Handler {
	return func(c *fiber.Ctx) error {
		id := c.Params("id")
		if !ids.Valid(ids.Conversion, id) {
			return errNoConversion
		}
		var in struct {
			Reason string `json:"reason"`
		}
		if err := decodeOptionalJSON(c, &in); err != nil {
			return err
		}
		conv, err := h.svc.ChangeStatus(c.UserContext(), Caller(c).CompanyID, id, to, strings.TrimSpace(in.Reason))
		if err != nil {
			return conversionsProblem(c, err)
		}
		return c.JSON(conversionView(conv, true))
	}
}

// bulkIDs is a bulk route whose body is only {"ids": [...]}: approval and release.
func (h conversionHandlers) bulkIDs(decide func(ConversionService, context.Context, string, []string) ([]conversions.Conversion, error)) fiber.Handler {
	return func(c *fiber.Ctx) error {
		var in struct {
			IDs []string `json:"ids"`
		}
		if err := DecodeJSON(c, &in); err != nil {
			return err
		}
		list, err := decide(h.svc, c.UserContext(), Caller(c).CompanyID, in.IDs)
		return bulkDecision(c, list, err)
	}
}

func (h conversionHandlers) rejectMany(c *fiber.Ctx) error {
	var in struct {
		IDs    []string `json:"ids"`
		Reason string   `json:"reason"`
	}
	if err := DecodeJSON(c, &in); err != nil {
		return err
	}
	list, err := h.svc.RejectMany(c.UserContext(), Caller(c).CompanyID, in.IDs, strings.TrimSpace(in.Reason))
	return bulkDecision(c, list, err)
}

// bulkDecision answers a bulk approval or rejection: every decided conversion, or the
// problem naming each one that could not be.
func bulkDecision(c *fiber.Ctx, list []conversions.Conversion, err error) error {
	if err != nil {
		return conversionsProblem(c, err)
	}
	out := make([]conversionJSON, len(list))
	for i, conv := range list {
		out[i] = conversionView(conv, true)
	}
	return c.JSON(fiber.Map{"data": out})
}

func conversionsViewer(c *fiber.Ctx) conversions.Viewer {
	p := Caller(c)
	return conversions.Viewer{CompanyID: p.CompanyID, Affiliate: p.CompanyKind == identity.Affiliate}
}

// conversionInput is the body of POST /api/v1/conversions.
type conversionInput struct {
	ClickID    string          `json:"click_id"`
	CouponCode string          `json:"coupon_code"`
	CustomerID string          `json:"customer_id"`
	ProgramID  string          `json:"program_id"`
	ExternalID string          `json:"external_id"`
	Type       string          `json:"type"`
	Amount     decimalInput    `json:"amount"`
	Currency   string          `json:"currency"`
	OccurredAt string          `json:"occurred_at"`
	Metadata   json.RawMessage `json:"metadata"`
	// CustomerEmail feeds the fraud rules; it is kept only as a keyed hash, never shown.
	CustomerEmail string `json:"customer_email"`
}

func (in conversionInput) toNew() (conversions.NewConversion, error) {
	at, err := parseTime("occurred_at", in.OccurredAt, false)
	if err != nil {
		return conversions.NewConversion{}, err
	}
	meta := in.Metadata
	if string(meta) == "null" {
		meta = nil
	}
	return conversions.NewConversion{ClickID: in.ClickID, CouponCode: in.CouponCode, CustomerID: in.CustomerID, ProgramID: in.ProgramID,
		ExternalID: in.ExternalID, Type: in.Type, Amount: string(in.Amount), Currency: in.Currency, OccurredAt: at, Metadata: meta,
		CustomerEmail: in.CustomerEmail}, nil
}

// decimalInput takes an amount as a decimal string ("42.50") or a JSON number (42.5), keeping
// its digits as written: it is parsed exactly later, never through a float.
type decimalInput string

func (d *decimalInput) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*d = decimalInput(s)
		return nil
	}
	if string(b) == "null" {
		return nil
	}
	*d = decimalInput(b)
	return nil
}

// conversionsQuery reads the list filters and the page.
func conversionsQuery(c *fiber.Ctx) (conversions.Filter, page.Request, error) {
	p, err := PageRequest(c)
	if err != nil {
		return conversions.Filter{}, p, err
	}
	f, err := conversionsFilter(c)
	return f, p, err
}

// conversionsFilter reads the filters of the conversion and commission lists and exports.
func conversionsFilter(c *fiber.Ctx) (conversions.Filter, error) {
	f := conversions.Filter{Status: c.Query("status"), ProgramID: c.Query("program_id"), AffiliateID: c.Query("affiliate_id"), PayoutID: c.Query("payout_id")}
	var errs []FieldError
	if f.Status != "" && !slices.Contains(conversions.Statuses, f.Status) {
		errs = append(errs, FieldError{Field: "status", Message: "must be one of " + strings.Join(conversions.Statuses, ", ")})
	}
	for _, q := range []struct{ field, prefix, v string }{
		{"program_id", ids.Program, f.ProgramID}, {"affiliate_id", ids.Company, f.AffiliateID}, {"payout_id", ids.Payout, f.PayoutID},
	} {
		if q.v != "" && !ids.Valid(q.prefix, q.v) {
			errs = append(errs, FieldError{Field: q.field, Message: "must be an id starting with " + q.prefix + "_"})
		}
	}
	errs = append(errs, timeRange(&f.From, &f.To, c.Query("from"), c.Query("to"))...)
	if errs != nil {
		return f, Invalid(errs...)
	}
	return f, nil
}

// conversionJSON is a conversion as the API shows it: amounts as decimal strings.
type conversionJSON struct {
	ID           string `json:"id"`
	ProgramID    string `json:"program_id"`
	AdvertiserID string `json:"advertiser_id"`
	AffiliateID  string `json:"affiliate_id"`
	// Absent in the answer to registering a conversion, which is built without reading.
	AdvertiserName string          `json:"advertiser_name,omitempty"`
	AffiliateName  string          `json:"affiliate_name,omitempty"`
	PartnershipID  *string         `json:"partnership_id"`
	LinkID         *string         `json:"link_id"`
	ClickID        *string         `json:"click_id"`
	PromotionID    *string         `json:"promotion_id"`
	Sub1           string          `json:"sub1"`
	ClickedAt      *time.Time      `json:"clicked_at"`
	ExternalID     string          `json:"external_id"`
	Type           string          `json:"type"`
	Amount         string          `json:"amount"`
	Currency       string          `json:"currency"`
	OccurredAt     time.Time       `json:"occurred_at"`
	Metadata       json.RawMessage `json:"metadata,omitempty"`
	Source         string          `json:"source"`
	CreatedAt      time.Time       `json:"created_at"`
	*exchangeJSON
	Commission commissionJSON `json:"commission"`

	Attribution string  `json:"attribution"`
	CouponCode  *string `json:"coupon_code"`
	CustomerID  *string `json:"customer_id"`
	// Risk is the fraud verdict (docs/fraud.md).
	Risk riskJSON `json:"risk"`
}

// exchangeJSON is the exchange snapshot of a conversion reported in another currency, on the
// conversion and its commission; absent in the program currency.
type exchangeJSON struct {
	OriginalAmount   string `json:"original_amount"`
	OriginalCurrency string `json:"original_currency"`
	ExchangeRate     string `json:"exchange_rate"`
	RateDate         string `json:"rate_date"`
	// ConvertedAmount is the sale in the program currency (the conversion's amount).
	ConvertedAmount string `json:"converted_amount"`
}

func exchangeView(e *conversions.Exchange, currency string) *exchangeJSON {
	if e == nil {
		return nil
	}
	return &exchangeJSON{OriginalAmount: money.Format(e.OriginalAmount, e.OriginalCurrency), OriginalCurrency: e.OriginalCurrency,
		ExchangeRate: e.Rate, RateDate: e.RateDate.Format(time.DateOnly), ConvertedAmount: money.Format(e.ConvertedAmount, currency)}
}

type commissionJSON struct {
	ID           string     `json:"id"`
	ConversionID string     `json:"conversion_id"`
	ProgramID    string     `json:"program_id"`
	AdvertiserID string     `json:"advertiser_id"`
	AffiliateID  string     `json:"affiliate_id"`
	Amount       string     `json:"amount"`
	Currency     string     `json:"currency"`
	Status       string     `json:"status"`
	Reason       string     `json:"reason"`
	HoldUntil    *time.Time `json:"hold_until"`
	PayoutID     *string    `json:"payout_id"`
	OccurredAt   time.Time  `json:"occurred_at"`
	Version      int64      `json:"version"`
	CreatedAt    time.Time  `json:"created_at"`
	UpdatedAt    time.Time  `json:"updated_at"`
	*exchangeJSON
}

// conversionView shows a conversion; the metadata is the advertiser's and affiliates do not
// see it.
func conversionView(c conversions.Conversion, metadata bool) conversionJSON {
	v := conversionJSON{ID: c.ID, ProgramID: c.ProgramID, AdvertiserID: c.AdvertiserID, AffiliateID: c.AffiliateID,
		AdvertiserName: c.AdvertiserName, AffiliateName: c.AffiliateName,
		PartnershipID: conversionsNull(c.PartnershipID), LinkID: conversionsNull(c.LinkID), ClickID: conversionsNull(c.ClickID), PromotionID: conversionsNull(c.PromotionID),
		Sub1: c.Sub1, ExternalID: c.ExternalID, Type: c.Type, Amount: money.Format(c.Amount, c.Currency),
		Currency: c.Currency, OccurredAt: c.OccurredAt, Source: c.Source, CreatedAt: c.CreatedAt, exchangeJSON: exchangeView(c.Exchange, c.Currency),
		Commission:  commissionView(c.Commission),
		Attribution: c.Attribution, CouponCode: conversionsNull(c.CouponCode), CustomerID: conversionsNull(c.CustomerID),
		Risk: riskView(c.Commission.Verdict(), metadata)}
	if !c.ClickedAt.IsZero() {
		v.ClickedAt = &c.ClickedAt
	}
	if metadata {
		v.Metadata = c.Metadata
	}
	return v
}

func commissionView(m conversions.Commission) commissionJSON {
	return commissionJSON{ID: m.ID, ConversionID: m.ConversionID, ProgramID: m.ProgramID, AdvertiserID: m.AdvertiserID,
		AffiliateID: m.AffiliateID, Amount: money.Format(m.Amount, m.Currency), Currency: m.Currency, Status: m.Status,
		Reason: m.Reason, HoldUntil: m.HoldUntil, PayoutID: conversionsNull(m.PayoutID), OccurredAt: m.OccurredAt,
		Version: m.Version, CreatedAt: m.CreatedAt, UpdatedAt: m.UpdatedAt, exchangeJSON: exchangeView(m.Exchange, m.Currency)}
}

func conversionsNull(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// bulkFailureJSON is one entry of a failed bulk decision's "failures".
type bulkFailureJSON struct {
	ID      string   `json:"id"`
	Code    string   `json:"code"`
	Status  string   `json:"status,omitempty"`
	Allowed []string `json:"allowed,omitempty"`
}

// conversionsProblem maps the conversions domain's errors (conversions, commissions, payouts,
// postbacks) to problems; anything else stays a 500.
func conversionsProblem(c *fiber.Ctx, err error) error {
	var (
		inv  *conversions.InvalidError
		te   *conversions.TransitionError
		bulk *conversions.BulkError
		// noRate: a conversion in another currency without a rate (conversions.ErrNoExchangeRate)
		noRate *rates.NoRateError
	)
	switch {
	case errors.As(err, &inv):
		return Invalid(FieldError{Field: inv.Field, Message: inv.Message})
	case errors.As(err, &te):
		return NewProblem(fiber.StatusConflict, "invalid_transition", te.Error()).With("current_status", te.From).With("allowed", nonNil(te.Allowed))
	case errors.As(err, &bulk):
		failures := make([]bulkFailureJSON, len(bulk.Failures))
		for i, f := range bulk.Failures {
			failures[i] = bulkFailureJSON{ID: f.ID, Code: f.Code, Status: f.Status, Allowed: f.Allowed}
		}
		code := map[string]string{conversions.Rejected: "bulk_rejection_failed", conversions.Released: "bulk_release_failed"}[bulk.To]
		if code == "" {
			code = "bulk_approval_failed"
		}
		return NewProblem(fiber.StatusConflict, code, bulk.Error()).With("failures", failures)
	case errors.Is(err, conversions.ErrNotFound):
		return NewProblem(fiber.StatusNotFound, "not_found", "no such conversion, payout or program")
	case errors.Is(err, conversions.ErrUnknownClick):
		return NewProblem(fiber.StatusUnprocessableEntity, "unknown_click", "no click of yours has this click_id: send the value your landing page received in its click parameter (ps_click_id)")
	case errors.Is(err, conversions.ErrUnknownCoupon):
		return NewProblem(fiber.StatusUnprocessableEntity, "unknown_coupon", "none of your coupon codes (of this program) is this one")
	case errors.Is(err, conversions.ErrUnknownCustomer):
		return NewProblem(fiber.StatusUnprocessableEntity, "unknown_customer", "no customer of yours has this customer_id yet: its first conversion needs a click_id or a coupon_code")
	case errors.Is(err, conversions.ErrCustomerExpired):
		return NewProblem(fiber.StatusUnprocessableEntity, "customer_expired", err.Error())
	case errors.Is(err, conversions.ErrClickExpired):
		// The domain writes these two for the caller: times, window, currencies.
		return NewProblem(fiber.StatusUnprocessableEntity, "click_expired", err.Error())
	case errors.As(err, &noRate):
		return NewProblem(fiber.StatusUnprocessableEntity, "no_exchange_rate", noRate.Error()+": set the rate for the conversion's day").
			With("base", noRate.Base).With("quote", noRate.Quote).With("date", noRate.Day.Format(time.DateOnly)).
			With("max_rate_age_days", noRate.MaxAgeDays)
	case errors.Is(err, conversions.ErrAttributionUnavailable):
		c.Set(fiber.HeaderRetryAfter, "5")
		return NewProblem(fiber.StatusServiceUnavailable, "attribution_unavailable", "the click's link cannot be read right now: retry shortly")
	case errors.Is(err, conversions.ErrInPayout):
		return NewProblem(fiber.StatusConflict, "commission_in_payout", "the commission is in a pending payout: cancel the payout (or mark it failed) first")
	case errors.Is(err, conversions.ErrHeld):
		return NewProblem(fiber.StatusConflict, "commission_held", "a fraud rule holds the commission: release it (POST /api/conversions/release) or reject it")
	case errors.Is(err, conversions.ErrPaidByPayout):
		return NewProblem(fiber.StatusConflict, "invalid_transition", "a commission becomes paid only when its payout is marked paid")
	case errors.Is(err, conversions.ErrNoCommissions):
		return NewProblem(fiber.StatusUnprocessableEntity, "no_commissions", "no approved commission of this affiliate in this currency and period waits for a payout")
	case errors.Is(err, conversions.ErrInvalidToken):
		return NewProblem(fiber.StatusUnauthorized, "invalid_postback_token", "the postback token is malformed, unknown or was rotated")
	}
	return err
}
