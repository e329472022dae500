package httpapi

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/partnerstream/partnerstream/internal/money"
	"github.com/partnerstream/partnerstream/internal/stats"
)

// StatsQuerier answers statistics queries (internal/stats.Service).
type StatsQuerier interface {
	// Resolve validates the parameters and fills their defaults (the range above all).
	Resolve(p stats.Params) (stats.Params, error)
	Query(ctx context.Context, scope stats.Scope, p stats.Params) ([]stats.Row, error)
}

// Limits of the rows of the groupings other than day and hour (a row per day or hour of the
// range, at most stats.MaxDays or 24 stats.MaxHourDays, is always complete).
const (
	statsDefaultLimit = 100
	statsMaxLimit     = 1000
)

// MountStats adds the statistics report: GET /api/v1/stats and /api/partner-api/stats for
// API keys, GET /api/stats for the dashboard. Each caller sees only its company's figures:
// an advertiser its programs', an affiliate its own.
func (s *Server) MountStats(q StatsQuerier) {
	h := statsHandlers{q: q}
	s.app.Get("/api/v1/stats", h.report)
	s.app.Get("/api/partner-api/stats", h.report)
	s.app.Get("/api/stats", h.report)
}

type statsHandlers struct{ q StatsQuerier }

func (h statsHandlers) report(c *fiber.Ctx) error {
	p, limit, err := statsRequest(c, h.q)
	if err != nil {
		return err
	}
	rows, err := h.q.Query(c.UserContext(), statsScope(c), p)
	if err != nil {
		return statsProblem(err)
	}
	total := stats.Total(rows)
	out := statsResponse{
		From: p.From.Format(time.DateOnly), To: p.To.Format(time.DateOnly), TZ: p.Location.String(), GroupBy: string(p.GroupBy),
		Totals: figures(total), Currencies: []string{},
	}
	for _, a := range total.Amounts {
		out.Currencies = append(out.Currencies, a.Currency)
	}
	if p.Currency != "" && len(out.Currencies) == 0 {
		out.Currencies = []string{p.Currency} // no rows at all
	}
	if len(out.Currencies) == 1 {
		out.Currency = &out.Currencies[0]
	}
	if p.GroupBy != stats.Day && p.GroupBy != stats.Hour && len(rows) > limit {
		rows, out.HasMore = rows[:limit], true
	}
	out.Data = make([]statsRow, len(rows))
	for i, r := range rows {
		out.Data[i] = statsRow{statsKey: key(p.GroupBy, r), statsFigures: figures(r)}
	}
	return c.JSON(out)
}

// statsRequest reads the query and resolves its defaults with r (the report's and the
// export's parameters).
func statsRequest(c *fiber.Ctx, r interface {
	Resolve(stats.Params) (stats.Params, error)
}) (stats.Params, int, error) {
	p, limit, err := statsParams(c)
	if err != nil {
		return p, limit, err
	}
	if p, err = r.Resolve(p); err != nil {
		return p, limit, statsProblem(err)
	}
	return p, limit, nil
}

// statsScope is the caller's statistics scope.
func statsScope(c *fiber.Ctx) stats.Scope {
	caller := Caller(c)
	return stats.Scope{CompanyID: caller.CompanyID, Kind: caller.CompanyKind}
}

// statsParams reads the query, reporting every malformed parameter at once.
func statsParams(c *fiber.Ctx) (stats.Params, int, error) {
	p := stats.Params{GroupBy: stats.GroupBy(c.Query("group_by")), ProgramID: c.Query("program_id"), Currency: c.Query("currency"), TZ: c.Query("tz")}
	for _, name := range stats.Filters {
		if v := c.Query(name); v != "" {
			if p.Where == nil {
				p.Where = map[string]string{}
			}
			p.Where[name] = v
		}
	}
	var errs []FieldError
	for _, d := range []struct {
		field string
		into  *time.Time
	}{{"from", &p.From}, {"to", &p.To}} {
		v := c.Query(d.field)
		if v == "" {
			continue
		}
		t, err := time.Parse(time.DateOnly, v)
		if err != nil {
			errs = append(errs, FieldError{Field: d.field, Message: "must be a date as YYYY-MM-DD, got " + strconv.Quote(v)})
			continue
		}
		*d.into = t
	}
	limit := statsDefaultLimit
	if v := c.Query("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > statsMaxLimit {
			errs = append(errs, FieldError{Field: "limit", Message: "must be a whole number from 1 to " + strconv.Itoa(statsMaxLimit)})
		}
		limit = n
	}
	if len(errs) > 0 {
		return stats.Params{}, 0, Invalid(errs...)
	}
	return p, limit, nil
}

func statsProblem(err error) error {
	var pe *stats.ParamError
	switch {
	case errors.As(err, &pe):
		return Invalid(FieldError{Field: pe.Field, Message: pe.Message})
	case errors.Is(err, stats.ErrScope):
		return NewProblem(fiber.StatusForbidden, "forbidden", "statistics are kept for advertiser and affiliate companies only")
	}
	return err
}

type statsResponse struct {
	From string `json:"from"`
	To   string `json:"to"`
	// TZ is the zone of from, to, the days and the hours.
	TZ      string `json:"tz"`
	GroupBy string `json:"group_by"`
	// Currency is the one currency of the amounts: the one asked for, else the only one the
	// conversions in range have; null when they have none or several.
	Currency *string `json:"currency"`
	// Currencies are those of the amounts, sorted: each row's amounts has one per currency.
	Currencies []string     `json:"currencies"`
	Data       []statsRow   `json:"data"`
	Totals     statsFigures `json:"totals"`
	// HasMore says rows were left out beyond limit (never for day or hour).
	HasMore bool `json:"has_more"`
}

type statsRow struct {
	statsKey
	statsFigures
}

// statsKey holds the group's fields: only those of the grouping are present (a link also
// names its program and affiliate).
type statsKey struct {
	Day         *string `json:"day,omitempty"`
	Hour        *string `json:"hour,omitempty"`
	ProgramID   *string `json:"program_id,omitempty"`
	AffiliateID *string `json:"affiliate_id,omitempty"`
	LinkID      *string `json:"link_id,omitempty"`
	Sub1        *string `json:"sub1,omitempty"`
	Attribution *string `json:"attribution,omitempty"`
	// Where the clicks come from: "" (0 for asn) is a value ingest could not tell.
	Country     *string `json:"country,omitempty"`
	Region      *string `json:"region,omitempty"`
	City        *string `json:"city,omitempty"`
	ASN         *uint32 `json:"asn,omitempty"`
	ASOrg       *string `json:"as_org,omitempty"`
	Device      *string `json:"device,omitempty"`
	Browser     *string `json:"browser,omitempty"`
	OS          *string `json:"os,omitempty"`
	Referrer    *string `json:"referrer,omitempty"`
	UTMSource   *string `json:"utm_source,omitempty"`
	UTMCampaign *string `json:"utm_campaign,omitempty"`
}

func key(g stats.GroupBy, r stats.Row) statsKey {
	switch g {
	case stats.Day:
		d := r.Day.Format(time.DateOnly)
		return statsKey{Day: &d}
	case stats.Hour:
		h := r.Hour.Format(time.RFC3339)
		return statsKey{Hour: &h}
	case stats.Program:
		return statsKey{ProgramID: &r.ProgramID}
	case stats.Affiliate:
		return statsKey{AffiliateID: &r.AffiliateID}
	case stats.Link:
		return statsKey{LinkID: &r.LinkID, ProgramID: &r.ProgramID, AffiliateID: &r.AffiliateID}
	case stats.Attribution:
		return statsKey{Attribution: &r.Attribution}
	case stats.Country:
		return statsKey{Country: &r.Country}
	case stats.Region:
		return statsKey{Region: &r.Region, Country: &r.Country}
	case stats.City:
		return statsKey{City: &r.City, Region: &r.Region, Country: &r.Country}
	case stats.ASN:
		return statsKey{ASN: &r.ASN, ASOrg: &r.ASOrg}
	case stats.Device:
		return statsKey{Device: &r.Device}
	case stats.Browser:
		return statsKey{Browser: &r.Browser}
	case stats.OS:
		return statsKey{OS: &r.OS}
	case stats.Referrer:
		return statsKey{Referrer: &r.Referrer}
	case stats.UTMSource:
		return statsKey{UTMSource: &r.UTMSource}
	case stats.UTMCampaign:
		return statsKey{UTMCampaign: &r.UTMCampaign}
	}
	return statsKey{Sub1: &r.Sub1}
}

type statsFigures struct {
	Clicks       int64            `json:"clicks"`
	UniqueClicks int64            `json:"unique_clicks"`
	Conversions  statsConversions `json:"conversions"`
	// SaleAmount, Commission and EPC are in the response's currency; null when the amounts
	// are in several currencies (Amounts has them, never summed across currencies).
	SaleAmount     *string       `json:"sale_amount"`
	Commission     *string       `json:"commission"`
	EPC            *string       `json:"epc"`
	ConversionRate float64       `json:"conversion_rate"`
	Amounts        []statsAmount `json:"amounts"`
}

// statsAmount is a row's amounts in one currency; EPC is its commission per click of the row.
type statsAmount struct {
	Currency   string `json:"currency"`
	SaleAmount string `json:"sale_amount"`
	Commission string `json:"commission"`
	EPC        string `json:"epc"`
}

type statsConversions struct {
	Total    int64 `json:"total"`
	Pending  int64 `json:"pending"`
	Approved int64 `json:"approved"`
	Rejected int64 `json:"rejected"`
	Paid     int64 `json:"paid"`
	Reversed int64 `json:"reversed"`
}

// figures formats amounts in their currency; without any currency they read as two decimals.
func figures(r stats.Row) statsFigures {
	c := r.Conversions
	f := statsFigures{
		Clicks: r.Clicks, UniqueClicks: r.UniqueClicks,
		Conversions:    statsConversions{Total: c.Total, Pending: c.Pending, Approved: c.Approved, Rejected: c.Rejected, Paid: c.Paid, Reversed: c.Reversed},
		ConversionRate: r.ConversionRate(), Amounts: make([]statsAmount, len(r.Amounts)),
	}
	for i, a := range r.Amounts {
		f.Amounts[i] = statsAmount{Currency: a.Currency, SaleAmount: money.FormatSum(a.SaleAmount, a.Currency),
			Commission: money.FormatSum(a.Commission, a.Currency), EPC: money.FormatSum(a.EPC(r.Clicks), a.Currency)}
	}
	if len(r.Amounts) <= 1 {
		sale, commission, epc := money.FormatSum(r.SaleAmount, r.Currency), money.FormatSum(r.Commission, r.Currency), money.FormatSum(r.EPC(), r.Currency)
		f.SaleAmount, f.Commission, f.EPC = &sale, &commission, &epc
	}
	return f
}
