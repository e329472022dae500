package httpapi

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/partnerstream/partnerstream/internal/conversions"
	"github.com/partnerstream/partnerstream/internal/fraud"
	"github.com/partnerstream/partnerstream/internal/fraudreview"
	"github.com/partnerstream/partnerstream/internal/ids"
	"github.com/partnerstream/partnerstream/internal/money"
	"github.com/partnerstream/partnerstream/internal/page"
)

// FraudReview is what the review routes need: the queue (fraudreview.Queue), the backtest
// (fraudreview.Backtest) and the programs' rules (fraud.Service), which a backtest of one
// program starts from, with the partnerships' exemptions a backtest applies.
type FraudReview struct {
	Queue interface {
		List(ctx context.Context, advertiserID string, f conversions.Filter, p page.Request) ([]fraudreview.Item, string, error)
	}
	Backtest interface {
		Run(ctx context.Context, advertiserID string, req fraudreview.BacktestRequest) (fraudreview.BacktestResult, error)
	}
	Rules interface {
		Get(ctx context.Context, advertiserID, programID string) (fraud.Program, error)
		Exemptions(ctx context.Context, advertiserID, programID string) (map[fraud.Partnership][]string, error)
	}
}

// MountFraudReview adds the advertiser's review routes: the queue of flagged and held
// commissions with their evidence, and the backtest of a rule set (every member: both
// only read).
func (s *Server) MountFraudReview(r FraudReview) {
	h := reviewHandlers{r}
	s.app.Get("/api/fraud/queue", advertiserOnly, h.queue)
	s.app.Post("/api/fraud/backtest", advertiserOnly, h.backtest)
}

type reviewHandlers struct{ FraudReview }

// reviewItemJSON is a conversion of the queue: the conversion with its risk, and its click.
type reviewItemJSON struct {
	conversionJSON
	Click *clickEvidenceJSON `json:"click"`
}

type clickEvidenceJSON struct {
	At             time.Time `json:"at"`
	Country        string    `json:"country"`
	Region         string    `json:"region"`
	City           string    `json:"city"`
	ASN            uint32    `json:"asn"`
	ASOrg          string    `json:"as_org"`
	Hosting        bool      `json:"hosting"`
	DeviceType     string    `json:"device_type"`
	Browser        string    `json:"browser"`
	OS             string    `json:"os"`
	Referrer       string    `json:"referrer"`
	ReferrerDomain string    `json:"referrer_domain"`
}

func (h reviewHandlers) queue(c *fiber.Ctx) error {
	f, p, err := conversionsQuery(c)
	if err != nil {
		return err
	}
	f.Risk, f.ReasonCode = c.Query("state", conversions.RiskAny), c.Query("code")
	var errs []FieldError
	if !slices.Contains(conversions.Risks, f.Risk) {
		errs = append(errs, FieldError{Field: "state", Message: "must be one of " + strings.Join(conversions.Risks, ", ")})
	}
	if _, ok := fraud.Lookup(f.ReasonCode); f.ReasonCode != "" && !ok {
		errs = append(errs, FieldError{Field: "code", Message: "is not a reason code; known: " + strings.Join(fraud.Codes(), ", ")})
	}
	if errs != nil {
		return Invalid(errs...)
	}
	items, next, err := h.Queue.List(c.UserContext(), Caller(c).CompanyID, f, p)
	if err != nil {
		return conversionsProblem(c, err)
	}
	out := make([]reviewItemJSON, len(items))
	for i, it := range items {
		out[i].conversionJSON = conversionView(it.Conversion, true)
		if k := it.Click; k != nil {
			out[i].Click = &clickEvidenceJSON{At: k.At, Country: k.Country, Region: k.Region, City: k.City, ASN: k.ASN, ASOrg: k.ASOrg,
				Hosting: k.Hosting, DeviceType: k.DeviceType, Browser: k.Browser, OS: k.OS, Referrer: k.Referrer, ReferrerDomain: k.ReferrerDomain}
		}
	}
	return c.JSON(page.List[reviewItemJSON]{Data: out, NextCursor: next})
}

func (h reviewHandlers) backtest(c *fiber.Ctx) error {
	var in struct {
		Rules     map[string]fraudRuleInput `json:"rules"`
		ProgramID string                    `json:"program_id"`
		From      string                    `json:"from"`
		To        string                    `json:"to"`
	}
	if err := DecodeJSON(c, &in); err != nil {
		return err
	}
	var req fraudreview.BacktestRequest
	errs := timeRange(&req.From, &req.To, in.From, in.To)
	for _, q := range []struct {
		field string
		t     time.Time
	}{{"from", req.From}, {"to", req.To}} {
		if q.t.IsZero() && !slices.ContainsFunc(errs, func(e FieldError) bool { return e.Field == q.field }) {
			errs = append(errs, FieldError{Field: q.field, Message: "is required: an RFC 3339 time or a date"})
		}
	}
	if !req.From.IsZero() && req.To.Sub(req.From) > fraudreview.MaxBacktestDays*24*time.Hour {
		errs = append(errs, FieldError{Field: "to", Message: fmt.Sprintf("must be at most %d days after from", fraudreview.MaxBacktestDays)})
	}
	if in.ProgramID != "" && !ids.Valid(ids.Program, in.ProgramID) {
		errs = append(errs, FieldError{Field: "program_id", Message: "must be an id starting with " + ids.Program + "_"})
	}
	if errs != nil {
		return Invalid(errs...)
	}
	changes, err := fraudChanges(in.Rules)
	if err != nil {
		return err
	}
	// A program's backtest starts from its rules as they are; the others from the defaults.
	base := fraud.Defaults()
	if in.ProgramID != "" {
		p, err := h.Rules.Get(c.UserContext(), Caller(c).CompanyID, in.ProgramID)
		if err != nil {
			return fraudProblem(err)
		}
		base = p.Settings
	}
	if req.Settings, err = fraud.Apply(base, changes); err != nil {
		return fraudProblem(err)
	}
	req.ProgramID = in.ProgramID
	if req.Exemptions, err = h.Rules.Exemptions(c.UserContext(), Caller(c).CompanyID, in.ProgramID); err != nil {
		return err
	}
	res, err := h.Backtest.Run(c.UserContext(), Caller(c).CompanyID, req)
	if err != nil {
		return err
	}
	return c.JSON(backtestView(res))
}

type amountJSON struct {
	Currency   string `json:"currency"`
	SaleAmount string `json:"sale_amount"`
	Commission string `json:"commission"`
}

type tallyJSON struct {
	Conversions int64        `json:"conversions"`
	Amounts     []amountJSON `json:"amounts"`
}

func tallyView(t fraudreview.Tally) tallyJSON {
	out := tallyJSON{Conversions: t.Conversions, Amounts: []amountJSON{}}
	for _, a := range t.Amounts {
		out.Amounts = append(out.Amounts, amountJSON{Currency: a.Currency, SaleAmount: money.FormatSum(a.Sale, a.Currency),
			Commission: money.FormatSum(a.Commission, a.Currency)})
	}
	return out
}

type backtestRuleJSON struct {
	Code      string    `json:"code"`
	Enabled   bool      `json:"enabled"`
	Action    string    `json:"action"`
	Shadow    bool      `json:"shadow"`
	Evaluated bool      `json:"evaluated"`
	Reason    string    `json:"reason,omitempty"`
	Fired     tallyJSON `json:"fired"`
}

type backtestPartnerJSON struct {
	AffiliateID string    `json:"affiliate_id"`
	Flagged     tallyJSON `json:"flagged"`
	Held        tallyJSON `json:"held"`
}

type backtestJSON struct {
	From        time.Time             `json:"from"`
	To          time.Time             `json:"to"`
	Evaluated   tallyJSON             `json:"evaluated"`
	Flagged     tallyJSON             `json:"flagged"`
	Held        tallyJSON             `json:"held"`
	Shadow      tallyJSON             `json:"shadow"`
	Rules       []backtestRuleJSON    `json:"rules"`
	TopPartners []backtestPartnerJSON `json:"top_partners"`
}

func backtestView(r fraudreview.BacktestResult) backtestJSON {
	out := backtestJSON{From: r.From, To: r.To, Evaluated: tallyView(r.Evaluated), Flagged: tallyView(r.Flagged), Held: tallyView(r.Held),
		Shadow: tallyView(r.Shadow), Rules: []backtestRuleJSON{}, TopPartners: []backtestPartnerJSON{}}
	for _, x := range r.Rules {
		out.Rules = append(out.Rules, backtestRuleJSON{Code: x.Code, Enabled: x.Enabled, Action: x.Action, Shadow: x.Shadow,
			Evaluated: x.Evaluated, Reason: x.Reason, Fired: tallyView(x.Fired)})
	}
	for _, p := range r.TopPartners {
		out.TopPartners = append(out.TopPartners, backtestPartnerJSON{AffiliateID: p.AffiliateID, Flagged: tallyView(p.Flagged), Held: tallyView(p.Held)})
	}
	return out
}
