package programs

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/partnerstream/partnerstream/internal/identity"
	"github.com/partnerstream/partnerstream/internal/ids"
	"github.com/partnerstream/partnerstream/internal/money"
	"github.com/partnerstream/partnerstream/internal/page"
)

// Defaults of a new program.
const (
	DefaultAttributionWindowDays = 30
	// DefaultMaxRateAgeDays: a conversion in another currency may use a rate of its own day
	// or of up to this many days before (docs/conversions.md, "Another currency").
	DefaultMaxRateAgeDays = 7
	DefaultClickParam     = "ps_click_id"
)

// Attribution rules: whether a touch (click or coupon code) of another affiliate takes over a
// bound customer (docs/conversions.md, "Customers, recurring commissions and coupon codes").
const (
	// FirstAffiliate keeps a bound customer with the partnership that brought it.
	FirstAffiliate = "first_affiliate"
	// LastClick gives the customer to the newest touch.
	LastClick = "last_click"
)

// MaxCustomerWindowDays bounds customer_window_days.
const MaxCustomerWindowDays = 3650

// Program is an advertiser's affiliate program.
type Program struct {
	ID           string `json:"id"`
	AdvertiserID string `json:"advertiser_id"`
	Name         string `json:"name"`
	Description  string `json:"description"`
	LandingURL   string `json:"landing_url"`
	// Currency (ISO 4217) of the program's amounts; it never changes.
	Currency              string `json:"currency"`
	Commission            Rule   `json:"commission"`
	AttributionWindowDays int    `json:"attribution_window_days"`
	// HoldDays before a pending commission is approved automatically; nil: never automatic.
	HoldDays *int `json:"hold_days"`
	// MaxRateAgeDays is how many days before a conversion's date its exchange rate may be.
	MaxRateAgeDays int    `json:"max_rate_age_days"`
	Visibility     string `json:"visibility"`
	// Listed: the program is in the affiliates' listing (always for a public program; an
	// approval program when its brand chooses, with "Apply").
	Listed bool   `json:"listed"`
	Status string `json:"status"`
	// ClickParam is the query parameter that carries the click id to the landing page.
	ClickParam string `json:"click_param"`
	// AttributionRule is FirstAffiliate or LastClick.
	AttributionRule string `json:"attribution_rule"`
	// CustomerWindowDays is how long a customer stays bound after its first conversion;
	// nil: for life.
	CustomerWindowDays *int `json:"customer_window_days"`
	// AdvertiserName is the brand's company name, which affiliates read in the listing.
	AdvertiserName string `json:"advertiser_name"`
	// Website is the brand's site ("" for none), Terms what the brand asks of its partners.
	Website    string   `json:"website"`
	Terms      string   `json:"terms"`
	Categories []string `json:"categories"`
	// Questions are asked of every affiliate that applies (Partnership.Answers).
	Questions []Question `json:"questions"`
	CreatedAt time.Time  `json:"created_at"`
	UpdatedAt time.Time  `json:"updated_at"`
}

// ProgramInput creates a program. Name, landing URL, currency and commission are required;
// the rest defaults (30 days, no hold, approval, active, ps_click_id).
type ProgramInput struct {
	Name                  string     `json:"name"`
	Description           string     `json:"description"`
	LandingURL            string     `json:"landing_url"`
	Currency              string     `json:"currency"`
	Commission            *RuleInput `json:"commission"`
	AttributionWindowDays *int       `json:"attribution_window_days"`
	HoldDays              *int       `json:"hold_days"`
	MaxRateAgeDays        *int       `json:"max_rate_age_days"`
	Visibility            string     `json:"visibility"`
	// Listed defaults to the visibility: a public program is listed, an approval one not.
	Listed             *bool      `json:"listed"`
	Status             string     `json:"status"`
	ClickParam         string     `json:"click_param"`
	AttributionRule    string     `json:"attribution_rule"`
	CustomerWindowDays *int       `json:"customer_window_days"`
	Website            string     `json:"website"`
	Terms              string     `json:"terms"`
	Categories         []string   `json:"categories"`
	Questions          []Question `json:"questions"`
}

// ProgramPatch changes a program: absent fields stay, hold_days null clears the hold. A
// status change follows active <-> paused, active|paused -> archived (final). The currency
// cannot change.
type ProgramPatch struct {
	Name                  Optional[string]     `json:"name"`
	Description           Optional[string]     `json:"description"`
	LandingURL            Optional[string]     `json:"landing_url"`
	Currency              Optional[string]     `json:"currency"`
	Commission            Optional[*RuleInput] `json:"commission"`
	AttributionWindowDays Optional[*int]       `json:"attribution_window_days"`
	HoldDays              Optional[int]        `json:"hold_days"`
	MaxRateAgeDays        Optional[*int]       `json:"max_rate_age_days"`
	Visibility            Optional[string]     `json:"visibility"`
	Listed                Optional[*bool]      `json:"listed"`
	Status                Optional[string]     `json:"status"`
	ClickParam            Optional[string]     `json:"click_param"`
	AttributionRule       Optional[string]     `json:"attribution_rule"`
	CustomerWindowDays    Optional[int]        `json:"customer_window_days"`
	Website               Optional[string]     `json:"website"`
	Terms                 Optional[string]     `json:"terms"`
	Categories            Optional[[]string]   `json:"categories"`
	Questions             Optional[[]Question] `json:"questions"`
}

// ProgramFilter narrows a program list.
type ProgramFilter struct {
	Status string // "" for every status
	// Partnered keeps, for an affiliate, only the programs it has a partnership with that is
	// not rejected: its own programs, without the public catalogue. Advertisers see their
	// own programs either way.
	Partnered bool
	// Query keeps the programs whose name, description or brand name contains it (any case).
	Query string
	// Category keeps the programs of one of Categories.
	Category string
}

var clickParamPattern = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

// validProgram checks a complete input and returns the program it describes (without id and
// times). v may already hold errors, which are reported with the others.
func validProgram(in ProgramInput, v *validator) (Program, error) {
	p := Program{
		Name: strings.TrimSpace(in.Name), Description: in.Description, LandingURL: in.LandingURL,
		Currency: in.Currency, HoldDays: in.HoldDays, Visibility: in.Visibility, Status: in.Status, ClickParam: in.ClickParam,
		AttributionRule: in.AttributionRule, CustomerWindowDays: in.CustomerWindowDays,
		Website: strings.TrimSpace(in.Website), Terms: in.Terms,
		Categories: append([]string{}, in.Categories...), Questions: append([]Question{}, in.Questions...),
	}
	v.text("name", p.Name, 1, 200, false)
	v.text("description", p.Description, 0, 5000, true)
	v.landingURL("landing_url", p.LandingURL)
	v.check(money.ValidCurrency(p.Currency), "currency", "must be an ISO 4217 currency code in upper case, e.g. EUR")
	if in.Commission == nil {
		v.add("commission", "is required")
	} else {
		r, errs := parseRule(*in.Commission, p.Currency, "commission")
		p.Commission = r
		v.errs = append(v.errs, errs...)
	}
	if in.AttributionWindowDays == nil {
		v.add("attribution_window_days", "is required")
	} else {
		p.AttributionWindowDays = *in.AttributionWindowDays
		v.check(p.AttributionWindowDays >= 1 && p.AttributionWindowDays <= 365, "attribution_window_days", "must be 1 to 365")
	}
	v.check(p.HoldDays == nil || (*p.HoldDays >= 0 && *p.HoldDays <= 365), "hold_days", "must be 0 to 365, or null for no automatic approval")
	if in.MaxRateAgeDays == nil {
		v.add("max_rate_age_days", "is required")
	} else {
		p.MaxRateAgeDays = *in.MaxRateAgeDays
		v.check(p.MaxRateAgeDays >= 0 && p.MaxRateAgeDays <= 365, "max_rate_age_days", "must be 0 to 365")
	}
	v.oneOf("visibility", p.Visibility, Public, Approval)
	p.Listed = p.Visibility == Public
	if in.Listed != nil {
		v.check(*in.Listed || p.Visibility != Public, "listed", "a public program is always listed")
		p.Listed = *in.Listed || p.Visibility == Public
	}
	v.oneOf("status", p.Status, ProgramActive, ProgramPaused, ProgramArchived)
	v.check(clickParamPattern.MatchString(p.ClickParam), "click_param", "must be 1 to 64 letters, digits, '_', '.' or '-'")
	v.oneOf("attribution_rule", p.AttributionRule, FirstAffiliate, LastClick)
	v.check(p.CustomerWindowDays == nil || (*p.CustomerWindowDays >= 1 && *p.CustomerWindowDays <= MaxCustomerWindowDays),
		"customer_window_days", "must be 1 to 3650, or null for the customer's lifetime")
	v.listing(&p)
	return p, v.err()
}

// input is the program as a complete input, the base a patch applies to.
func (p Program) input() ProgramInput {
	rule := p.Commission.Input()
	window, rateAge, listed := p.AttributionWindowDays, p.MaxRateAgeDays, p.Listed
	return ProgramInput{Name: p.Name, Description: p.Description, LandingURL: p.LandingURL, Currency: p.Currency,
		Commission: &rule, AttributionWindowDays: &window, HoldDays: p.HoldDays, MaxRateAgeDays: &rateAge, Visibility: p.Visibility, Listed: &listed,
		Status: p.Status, ClickParam: p.ClickParam, AttributionRule: p.AttributionRule, CustomerWindowDays: p.CustomerWindowDays,
		Website: p.Website, Terms: p.Terms, Categories: p.Categories, Questions: p.Questions}
}

func (pp ProgramPatch) apply(in ProgramInput, v *validator) ProgramInput {
	patch(&in.Name, pp.Name, "name", v)
	patch(&in.Description, pp.Description, "description", v)
	patch(&in.LandingURL, pp.LandingURL, "landing_url", v)
	patch(&in.Currency, pp.Currency, "currency", v)
	patch(&in.Commission, pp.Commission, "commission", v)
	patch(&in.AttributionWindowDays, pp.AttributionWindowDays, "attribution_window_days", v)
	patchNullable(&in.HoldDays, pp.HoldDays)
	patch(&in.MaxRateAgeDays, pp.MaxRateAgeDays, "max_rate_age_days", v)
	if pp.Visibility.Set && !pp.Visibility.Null && pp.Visibility.Value != in.Visibility {
		// A new visibility takes its own default (a program made approval leaves the
		// listing, as it always did) unless the patch says otherwise.
		in.Listed = nil
	}
	patch(&in.Visibility, pp.Visibility, "visibility", v)
	patch(&in.Listed, pp.Listed, "listed", v)
	patch(&in.Status, pp.Status, "status", v)
	patch(&in.ClickParam, pp.ClickParam, "click_param", v)
	patch(&in.AttributionRule, pp.AttributionRule, "attribution_rule", v)
	patchNullable(&in.CustomerWindowDays, pp.CustomerWindowDays)
	patch(&in.Website, pp.Website, "website", v)
	patch(&in.Terms, pp.Terms, "terms", v)
	patch(&in.Categories, pp.Categories, "categories", v)
	patch(&in.Questions, pp.Questions, "questions", v)
	return in
}

// patch applies a field that cannot be cleared.
func patch[T any](dst *T, o Optional[T], field string, v *validator) {
	switch {
	case !o.Set:
	case o.Null:
		v.add(field, "cannot be null")
	default:
		*dst = o.Value
	}
}

// patchNullable applies a field that null clears.
func patchNullable[T any](dst **T, o Optional[T]) {
	switch {
	case !o.Set:
	case o.Null:
		*dst = nil
	default:
		val := o.Value
		*dst = &val
	}
}

const programColumns = `p.id, p.advertiser_id, p.name, p.description, p.landing_url, p.currency, p.commission_type,
	p.commission_value, p.attribution_window_days, p.hold_days, p.max_rate_age_days, p.visibility, p.status, p.click_param, p.created_at, p.updated_at,
	p.listed, p.attribution_rule, p.customer_window_days, p.recurring_months, p.recurring_lifetime,
	p.website, p.terms, p.categories, p.questions, (SELECT c.name FROM companies c WHERE c.id = p.advertiser_id)`

func scanProgram(row pgx.CollectableRow) (Program, error) {
	var p Program
	var months *int
	var lifetime bool
	err := row.Scan(&p.ID, &p.AdvertiserID, &p.Name, &p.Description, &p.LandingURL, &p.Currency, &p.Commission.Type,
		&p.Commission.Value, &p.AttributionWindowDays, &p.HoldDays, &p.MaxRateAgeDays, &p.Visibility, &p.Status, &p.ClickParam, &p.CreatedAt, &p.UpdatedAt,
		&p.Listed, &p.AttributionRule, &p.CustomerWindowDays, &months, &lifetime,
		&p.Website, &p.Terms, &p.Categories, &p.Questions, &p.AdvertiserName)
	p.Commission.Currency = p.Currency
	p.Commission.Recurring = RecurringFrom(months, lifetime)
	p.CreatedAt, p.UpdatedAt = p.CreatedAt.UTC(), p.UpdatedAt.UTC()
	return p, err
}

// partnered is an affiliate's partnership with the program p that is not rejected.
const partnered = `EXISTS (SELECT 1 FROM partnerships s WHERE s.program_id = p.id AND s.affiliate_id = @company AND s.status <> 'rejected')`

// scope is the SQL condition on programs p that the actor may see: in lists (listed), or by id.
func scope(a Actor, listed bool) string {
	switch {
	case a.Kind == identity.Advertiser:
		return `p.advertiser_id = @company`
	case a.Kind != identity.Affiliate:
		return `false`
	case listed:
		return `((p.listed AND p.status = 'active') OR ` + partnered + `)`
	default:
		return `(p.status = 'active' OR ` + partnered + `)`
	}
}

// querier is a pool or a transaction.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// queryOne runs a query of one row and maps no row to a NotFoundError.
func queryOne[T any](ctx context.Context, q querier, what, sql string, args pgx.NamedArgs, scan pgx.RowToFunc[T]) (T, error) {
	rows, _ := q.Query(ctx, sql, args)
	v, err := pgx.CollectExactlyOneRow(rows, scan)
	if errors.Is(err, pgx.ErrNoRows) {
		return v, &NotFoundError{What: what}
	}
	if err != nil {
		return v, fmt.Errorf("read %s: %w", what, err)
	}
	return v, nil
}

// Program returns a program the actor may see by id.
func (s *Service) Program(ctx context.Context, a Actor, id string) (Program, error) {
	return queryOne(ctx, s.db, "program", `SELECT `+programColumns+` FROM programs p WHERE p.id = @id AND `+scope(a, false),
		pgx.NamedArgs{"id": id, "company": a.CompanyID}, scanProgram)
}

// ListPrograms lists the programs the actor sees, newest first.
func (s *Service) ListPrograms(ctx context.Context, a Actor, f ProgramFilter, pr page.Request) ([]Program, string, error) {
	v := &validator{}
	if f.Status != "" {
		v.oneOf("status", f.Status, ProgramActive, ProgramPaused, ProgramArchived)
	}
	if f.Category != "" {
		v.oneOf("category", f.Category, Categories...)
	}
	v.text("q", f.Query, 0, 200, false)
	if err := v.err(); err != nil {
		return nil, "", err
	}
	where := scope(a, true)
	if f.Partnered && a.Kind == identity.Affiliate {
		where = partnered
	}
	sql := `SELECT ` + programColumns + ` FROM programs p WHERE ` + where +
		` AND (@status = '' OR p.status = @status) AND (@before = '' OR p.id < @before)` +
		` AND (@category = '' OR @category = ANY (p.categories))` +
		` AND (@q = '' OR strpos(lower(p.name || ' ' || p.description || ' ' || (SELECT c.name FROM companies c WHERE c.id = p.advertiser_id)), lower(@q)) > 0)` +
		` ORDER BY p.id DESC LIMIT @limit`
	rows, _ := s.db.Query(ctx, sql, pgx.NamedArgs{"company": a.CompanyID, "status": f.Status, "before": pr.Before, "limit": pr.Limit + 1,
		"category": f.Category, "q": strings.TrimSpace(f.Query)})
	list, err := pgx.CollectRows(rows, scanProgram)
	if err != nil {
		return nil, "", fmt.Errorf("list programs: %w", err)
	}
	list, next := page.Cut(list, pr.Limit, func(p Program) string { return p.ID })
	return list, next, nil
}

// CreateProgram creates a program of the actor's company.
func (s *Service) CreateProgram(ctx context.Context, a Actor, in ProgramInput) (Program, error) {
	if err := a.requireAdvertiserWriter(); err != nil {
		return Program{}, err
	}
	if in.AttributionWindowDays == nil {
		d := DefaultAttributionWindowDays
		in.AttributionWindowDays = &d
	}
	if in.MaxRateAgeDays == nil {
		d := DefaultMaxRateAgeDays
		in.MaxRateAgeDays = &d
	}
	in.Visibility = cmp.Or(in.Visibility, Approval)
	in.Status = cmp.Or(in.Status, ProgramActive)
	in.ClickParam = cmp.Or(in.ClickParam, DefaultClickParam)
	in.AttributionRule = cmp.Or(in.AttributionRule, FirstAffiliate)
	v := &validator{}
	v.check(in.Status != ProgramArchived, "status", "a new program is active or paused")
	p, err := validProgram(in, v)
	if err != nil {
		return Program{}, err
	}
	now := s.now()
	p.ID, p.AdvertiserID, p.CreatedAt, p.UpdatedAt = ids.New(ids.Program), a.CompanyID, now, now
	months, lifetime := p.Commission.Recurring.Columns()
	_, err = s.db.Exec(ctx, `INSERT INTO programs (id, advertiser_id, name, description, landing_url, currency, commission_type,
		commission_value, attribution_window_days, hold_days, visibility, status, click_param, created_at, updated_at,
		attribution_rule, customer_window_days, recurring_months, recurring_lifetime, max_rate_age_days,
		website, terms, categories, questions, listed)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24)`,
		p.ID, p.AdvertiserID, p.Name, p.Description, p.LandingURL, p.Currency, p.Commission.Type, p.Commission.Value,
		p.AttributionWindowDays, p.HoldDays, p.Visibility, p.Status, p.ClickParam, now,
		p.AttributionRule, p.CustomerWindowDays, months, lifetime, p.MaxRateAgeDays,
		p.Website, p.Terms, p.Categories, p.Questions, p.Listed)
	if err != nil {
		return Program{}, fmt.Errorf("create program: %w", err)
	}
	if err := s.db.QueryRow(ctx, `SELECT name FROM companies WHERE id = $1`, a.CompanyID).Scan(&p.AdvertiserName); err != nil {
		return Program{}, fmt.Errorf("read the brand's name: %w", err)
	}
	return p, nil
}

// UpdateProgram applies a patch to a program of the actor's company. Changes that affect
// tracking links (status, landing URL, click parameter) notify LinkChangedChannel.
func (s *Service) UpdateProgram(ctx context.Context, a Actor, id string, pp ProgramPatch) (Program, error) {
	if err := a.requireAdvertiserWriter(); err != nil {
		return Program{}, err
	}
	var next Program
	err := pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		cur, err := queryOne(ctx, tx, "program", `SELECT `+programColumns+` FROM programs p WHERE p.id = @id AND `+scope(a, false)+` FOR UPDATE`,
			pgx.NamedArgs{"id": id, "company": a.CompanyID}, scanProgram)
		if err != nil {
			return err
		}
		v := &validator{}
		in := pp.apply(cur.input(), v)
		v.check(in.Currency == cur.Currency, "currency", "cannot change once the program exists")
		if next, err = validProgram(in, v); err != nil {
			return err
		}
		if next.Status != cur.Status {
			if err := checkTransition("program", programTransitions, cur.Status, next.Status); err != nil {
				return err
			}
		}
		next.ID, next.AdvertiserID, next.CreatedAt, next.UpdatedAt = cur.ID, cur.AdvertiserID, cur.CreatedAt, s.now()
		next.AdvertiserName = cur.AdvertiserName
		months, lifetime := next.Commission.Recurring.Columns()
		if _, err := tx.Exec(ctx, `UPDATE programs SET name = $2, description = $3, landing_url = $4, commission_type = $5,
			commission_value = $6, attribution_window_days = $7, hold_days = $8, visibility = $9, status = $10, click_param = $11,
			updated_at = $12, attribution_rule = $13, customer_window_days = $14, recurring_months = $15, recurring_lifetime = $16,
			max_rate_age_days = $17, website = $18, terms = $19, categories = $20, questions = $21, listed = $22 WHERE id = $1`,
			next.ID, next.Name, next.Description, next.LandingURL, next.Commission.Type, next.Commission.Value,
			next.AttributionWindowDays, next.HoldDays, next.Visibility, next.Status, next.ClickParam, next.UpdatedAt,
			next.AttributionRule, next.CustomerWindowDays, months, lifetime, next.MaxRateAgeDays,
			next.Website, next.Terms, next.Categories, next.Questions, next.Listed); err != nil {
			return fmt.Errorf("update program: %w", err)
		}
		if next.Status != cur.Status || next.LandingURL != cur.LandingURL || next.ClickParam != cur.ClickParam {
			return notifyLinksChanged(ctx, tx, next.ID)
		}
		return nil
	})
	if err != nil {
		return Program{}, err
	}
	return next, nil
}
