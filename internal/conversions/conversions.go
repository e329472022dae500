// Package conversions registers conversions, attributes them to the click that led to them,
// computes their commissions exactly, moves commissions through their states and gathers
// approved commissions into payouts. Every change writes its domain events to the outbox in
// the same Postgres transaction (internal/outbox), so an event exists if and only if the
// change committed.
//
// Attribution: a conversion names the click id the advertiser got on its landing page. The id
// is signed (package clickid) and says its link and time itself: the link, read from Postgres,
// gives the affiliate and program, so a conversion never waits for the analytics store. The
// conversion must come from the program's advertiser and occur within the program's
// attribution window after the click. A plain id, made by versions that could run without a
// signing key, names no click this package can find: it is an unknown click.
package conversions

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/partnerstream/partnerstream/internal/clickid"
	"github.com/partnerstream/partnerstream/internal/events"
	"github.com/partnerstream/partnerstream/internal/fraud"
	"github.com/partnerstream/partnerstream/internal/freetext"
	"github.com/partnerstream/partnerstream/internal/ids"
	"github.com/partnerstream/partnerstream/internal/money"
	"github.com/partnerstream/partnerstream/internal/rates"
	"github.com/partnerstream/partnerstream/internal/timebound"
)

// Conversion types.
const (
	TypeSale    = "sale"
	TypeLead    = "lead"
	TypeSignup  = "signup"
	TypeInstall = "install"
	TypeCustom  = "custom"
	// TypeRenewal is a subscription's later payment. It counts as every other type does;
	// the name lets reports tell renewals from first sales.
	TypeRenewal = "renewal"
)

// Types lists the conversion types.
var Types = []string{TypeSale, TypeLead, TypeSignup, TypeInstall, TypeCustom, TypeRenewal}

// Sources of a conversion.
const (
	SourceAPI      = "api"
	SourcePostback = "postback"
	// SourceStripe: a Stripe event sent to the program's endpoint (package billing).
	SourceStripe = "stripe"
)

// MaxExternalID is the longest external id (the advertiser's order id), in characters.
const MaxExternalID = 255

// MaxMetadata is the largest metadata object accepted, in bytes of JSON.
const MaxMetadata = 16 << 10

// Defaults of Options.
const (
	DefaultFutureSkew = 5 * time.Minute
)

// Conversion is a registered conversion with its commission.
type Conversion struct {
	ID           string
	ProgramID    string
	AdvertiserID string
	AffiliateID  string
	// The companies' names, read with the conversion (empty in what Register builds).
	AdvertiserName, AffiliateName string
	PartnershipID                 string // empty when the partnership no longer exists
	LinkID                        string // the click's fields: empty (zero) unless a click won
	ClickID                       string
	PromotionID                   string
	Sub1                          string
	ClickedAt                     time.Time
	ExternalID                    string
	Type                          string
	Amount                        int64 // minor units of Currency, the program's (converted when Exchange is set)
	Currency                      string
	OccurredAt                    time.Time
	Metadata                      json.RawMessage // a JSON object
	Source                        string
	CreatedAt                     time.Time
	// Exchange is the snapshot of a conversion reported in another currency; nil otherwise.
	Exchange   *Exchange
	Commission Commission

	// Attribution is what put the conversion on the affiliate: AttributionClick (the click
	// fields are set), AttributionCoupon (CouponCode) or AttributionCustomer (CustomerID).
	Attribution string
	CouponCode  string // the code as the advertiser gave it, when a code won
	CustomerID  string // the advertiser's id of its customer, when the conversion named one

	// Country and DeviceType of the click that won, as ingest enriched it; empty until
	// DecideClicks read the click.
	Country, DeviceType string
}

// Exchange is how a conversion reported in another currency than its program's was
// converted. It is written with the conversion (and copied onto its commission) and never
// changes, so a later correction of the rate leaves it alone.
type Exchange struct {
	OriginalAmount   int64 // minor units of OriginalCurrency, as reported
	OriginalCurrency string
	// Rate is the canonical decimal of the rate used: one OriginalCurrency is worth Rate of
	// the program currency.
	Rate     string
	RateDate time.Time // the day of the rate (midnight UTC)
	// ConvertedAmount is OriginalAmount * Rate in minor units of the program currency,
	// rounded half up (money.Convert).
	ConvertedAmount int64
}

// NewConversion is what an advertiser reports.
type NewConversion struct {
	// ClickID, CouponCode and CustomerID say who brought the conversion; at least one.
	ClickID    string
	CouponCode string
	CustomerID string
	ExternalID string // the advertiser's order id, unique per program
	Type       string // empty: sale
	// Amount is the sale amount, a decimal string in Currency; empty means zero.
	Amount string
	// Currency is the currency of Amount; empty means the program's. Another currency is
	// converted with the rate in force on OccurredAt's day (Exchange).
	Currency string
	// OccurredAt is when the conversion happened; zero means now.
	OccurredAt time.Time
	// Metadata is an optional JSON object of at most MaxMetadata bytes.
	Metadata json.RawMessage
	// ProgramID, when set, restricts attribution to clicks, codes and customers of that
	// program (a postback token belongs to one program).
	ProgramID string
	Source    string // empty: api
	// CustomerEmail is the customer's e-mail address, optional, for the fraud rules: it is
	// normalised and kept only as a keyed hash (docs/fraud.md), never stored or returned.
	CustomerEmail string
	email         *fraud.Email // CustomerEmail, normalised by validate
}

// Viewer is the company reading: an advertiser sees its programs' conversions, commissions
// and payouts; an affiliate sees its own.
type Viewer struct {
	CompanyID string
	Affiliate bool
}

// column is the column that scopes rows to the viewer.
func (v Viewer) column() string {
	if v.Affiliate {
		return "affiliate_id"
	}
	return "advertiser_id"
}

// Errors. Handlers map them to problems; the wrapped messages are safe to show the caller.
var (
	ErrNotFound = errors.New("not found")
	// ErrUnknownClick: no such click, or the click of another advertiser or program.
	ErrUnknownClick = errors.New("unknown click")
	// ErrClickExpired: the conversion occurred before the click or after the window.
	ErrClickExpired = errors.New("the click is outside the program's attribution window")
	// ErrNoExchangeRate: the conversion is in another currency than the program's and no
	// rate of the pair is in force on its day (a *rates.NoRateError says which).
	ErrNoExchangeRate = rates.ErrNoRate
	// ErrAttributionUnavailable: the link store (Postgres) did not answer.
	ErrAttributionUnavailable = errors.New("the link store is unavailable")
)

// InvalidError is input that fails validation, naming the field.
type InvalidError struct{ Field, Message string }

func (e *InvalidError) Error() string { return e.Field + ": " + e.Message }

func invalid(field, format string, a ...any) error {
	return &InvalidError{Field: field, Message: fmt.Sprintf(format, a...)}
}

// Options of the service.
type Options struct {
	// Now is the clock; time.Now when nil.
	Now func() time.Time
	// FutureSkew is how far in the future occurred_at may be (client clocks).
	// DefaultFutureSkew when 0.
	FutureSkew time.Duration
	// ClickIDs verify click ids; the zero Keys verifies none, so no click is attributed.
	ClickIDs clickid.Keys
	// Rates finds the exchange rate of a conversion in another currency; nil: the rates
	// kept in the same Postgres (rates.Service).
	Rates RateFinder
	// Clicks reads conversions' clicks as ingest stored them, for the click-stage fraud rules
	// and the click's country and device (fraud.ClickStore), in DecideClicks; nil reads none,
	// and no rule of that stage runs.
	Clicks ClickReader
}

// RateFinder finds the rate of base/quote a company keeps that is in force on the day of
// at, at most maxAgeDays before it; a *rates.NoRateError when there is none.
type RateFinder interface {
	InForce(ctx context.Context, companyID, base, quote string, at time.Time, maxAgeDays int) (rates.Rate, error)
}

// Service is the conversions, commissions and payouts store.
type Service struct {
	db       *pgxpool.Pool
	emails   fraud.Hasher
	clickIDs clickid.Keys
	rates    RateFinder
	clicks   ClickReader
	now      func() time.Time
	skew     time.Duration
}

// New returns the service.
func New(db *pgxpool.Pool, o Options) *Service {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.FutureSkew <= 0 {
		o.FutureSkew = DefaultFutureSkew
	}
	if o.Rates == nil {
		o.Rates = rates.New(db, o.Now)
	}
	// The customer-e-mail hash is keyed like the visitor hash, from the oldest click-id key:
	// every replica agrees, and adding a signing key changes no hash.
	return &Service{db: db, emails: fraud.NewHasher(o.ClickIDs.VisitorKey()), clickIDs: o.ClickIDs, rates: o.Rates,
		clicks: o.Clicks, now: func() time.Time { return o.Now().UTC() }, skew: o.FutureSkew}
}

// Register records a conversion reported by advertiserID and its pending commission. A
// repeated external id for the program returns the first conversion with created false,
// whatever else the repeat says; it never makes a second one, even under concurrent repeats.
//
// The click, the coupon code and the customer decide the affiliate (see attribute, touches
// and bind); the customer's binding, the conversion, its commission and its events are
// written in one transaction.
func (s *Service) Register(ctx context.Context, advertiserID string, in NewConversion) (Conversion, bool, error) {
	now := s.now()
	if err := s.validate(&in, now); err != nil {
		return Conversion{}, false, err
	}
	cands, programID, err := s.touches(ctx, advertiserID, in, now)
	if err != nil {
		return Conversion{}, false, err
	}
	leadAffiliate := ""
	if len(cands) > 0 {
		leadAffiliate = cands[0].affiliateID
	}
	t, err := s.terms(ctx, advertiserID, programID, unknownOf(in), in.ExternalID, leadAffiliate)
	if err != nil {
		return Conversion{}, false, err
	}
	if t.repeatOf != "" {
		// A repeat answers with the first conversion even if this request would now be refused
		// (occurred_at defaulted to a later now, a window shortened since, another currency...).
		c, err := s.byExternalID(ctx, s.db, programID, in.ExternalID)
		return c, false, err
	}
	// So does a repeat whose twin committed since the terms were read.
	firstOr := func(err error) (Conversion, bool, error) {
		if first, ferr := s.byExternalID(ctx, s.db, programID, in.ExternalID); ferr == nil {
			return first, false, nil
		}
		return Conversion{}, false, err
	}
	amount, ex, err := s.check(ctx, advertiserID, in, cands, t)
	if err != nil {
		return firstOr(err)
	}
	rules, err := fraud.ParseStored(t.fraud)
	if err != nil {
		return Conversion{}, false, err
	}
	id := ids.New(ids.Conversion)
	var c Conversion
	err = pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		won, first, boundAt, err := bind(ctx, tx, advertiserID, id, t, in, lead(cands, t.attributionRule))
		if err != nil {
			return err
		}
		r, err := t.ruleOf(ctx, tx, won.affiliateID)
		if err != nil {
			return err
		}
		c, err = build(id, advertiserID, in, won, t, r, amount, ex, first || r.covers(boundAt, in.OccurredAt), now)
		if err != nil {
			return err
		}
		var emailHash []byte
		if in.email != nil {
			emailHash = s.emails.Hash(*in.email)
		}
		// The click-stage rules and the click's country and device wait for the click loop
		// (DecideClicks): registration never reads ClickHouse.
		pending := c.Attribution == AttributionClick && s.clicks != nil
		// The duplicate rules read the conversions before this one in the insert's own
		// RETURNING (a statement does not see its own row), sparing registration a round
		// trip. An exact repeat of the order id in this program is a repeat (the first
		// conversion answers); what is left is the same id in another case, or in another
		// program of the advertiser, under another affiliate.
		order := b2i(rules.Active(fraud.DuplicateOrder, r.exempt))
		customer := b2i(rules.Active(fraud.DuplicateCustomer, r.exempt) && (c.CustomerID != "" || emailHash != nil))
		var facts fraud.Facts
		err = tx.QueryRow(ctx, `INSERT INTO conversions (id, program_id, advertiser_id, affiliate_id,
			partnership_id, link_id, click_id, promotion_id, sub1, clicked_at, external_id, type, amount,
			currency, occurred_at, metadata, source, created_at, attribution, coupon_code, customer_id, customer_email_hash, `+exchangeInsert+`,
			click_country, click_device_type, click_pending)
			VALUES ($1, $2, $3, $4, NULLIF($5, ''), $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21,
			$22, $23, $24, $25, $26, $27, NULLIF($28, ''), NULLIF($29, ''), $30)
			ON CONFLICT (program_id, external_id) DO NOTHING
			RETURNING `+duplicates[order][customer],
			append([]any{c.ID, c.ProgramID, c.AdvertiserID, c.AffiliateID, c.PartnershipID, c.LinkID, c.ClickID, c.PromotionID,
				c.Sub1, nullTime(c.ClickedAt), c.ExternalID, c.Type, c.Amount, c.Currency, c.OccurredAt, []byte(c.Metadata), c.Source,
				c.CreatedAt, c.Attribution, c.CouponCode, c.CustomerID, emailHash}, append(c.Exchange.values(), c.Country, c.DeviceType, pending)...)...).
			Scan(&facts.DuplicateOrder, &facts.DuplicateCustomer)
		var pgErr *pgconn.PgError
		switch {
		case errors.As(err, &pgErr) && strings.HasPrefix(pgErr.Code, "22"):
			// A data exception: the only input not checked field by field is the metadata
			// (e.g. a number beyond what Postgres numeric holds).
			return invalid("metadata", "cannot be stored: %s", pgErr.Message)
		case errors.Is(err, pgx.ErrNoRows):
			// A concurrent twin committed first (the insert waited for it). Roll back, so that
			// this request binds no customer, and answer with the twin.
			return errRepeat
		case err != nil:
			return fmt.Errorf("insert conversion: %w", err)
		}
		findings, err := s.decide(ctx, tx, rules, r.exempt, c, in.email, facts, now)
		if err != nil {
			return err
		}
		c.Commission.Findings = findings
		if fraud.Holds(findings) {
			c.Commission.HeldAt = &now
		}
		// The commission, its verdicts and its events go in one round trip.
		m := c.Commission
		q := queue{&pgx.Batch{}}
		_, _ = q.Exec(ctx, `INSERT INTO commissions (id, conversion_id, program_id, advertiser_id,
			affiliate_id, occurred_at, amount, currency, rule_type, rule_value, status, hold_until, version,
			created_at, updated_at, held_at, `+exchangeInsert+`)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $14, $15, $16, $17, $18, $19, $20)`,
			append([]any{m.ID, m.ConversionID, m.ProgramID, m.AdvertiserID, m.AffiliateID, m.OccurredAt, m.Amount, m.Currency,
				m.RuleType, m.RuleValue, m.Status, m.HoldUntil, m.Version, m.CreatedAt, m.HeldAt}, m.Exchange.values()...)...)
		if err := fraud.Record(ctx, q, m.ID, m.Findings); err != nil {
			return err
		}
		if err := emit(ctx, q, c, ""); err != nil {
			return err
		}
		if m.HeldAt != nil {
			if err := emitTypes(ctx, q, c, "", events.CommissionHeld); err != nil {
				return err
			}
		}
		if err := tx.SendBatch(ctx, q.Batch).Close(); err != nil {
			return fmt.Errorf("write commission %s and its events: %w", m.ID, err)
		}
		return nil
	})
	var inv *InvalidError
	switch {
	case errors.Is(err, errRepeat):
		c, err = s.byExternalID(ctx, s.db, programID, in.ExternalID)
		return c, false, err
	case errors.As(err, &inv), errors.Is(err, ErrUnknownCustomer), errors.Is(err, ErrCustomerExpired):
		return firstOr(err)
	case err != nil:
		return Conversion{}, false, fmt.Errorf("register conversion: %w", err)
	}
	return c, true, nil
}

// duplicates are what the insert of a conversion returns for the duplicate rules, by whether
// duplicate_order and duplicate_customer run: the earlier conversion of another affiliate
// with the same order id, and with the same customer (empty for none). A rule that does not run
// reads nothing. Four statements rather than one with flags: a flag Postgres can fold away
// makes it plan the statement anew at every execution.
//
// Each takes any one match with array_agg rather than LIMIT 1 or min(): Postgres caches a
// generic plan of the statement, where a LIMIT 1 (and min(), which it turns into one) makes a
// walk of the advertiser's rows in another index look cheap (it expects a match soon), and
// with no match (the common case) that walk reads every conversion of the advertiser: the cost
// grew with the table. Without a limit the planner costs the whole scan and takes the index
// made for the lookup (conversions_customer, conversions_customer_email: a partial index,
// which a generic plan uses only when the query repeats its predicate on the column, not on
// the parameter). The order read compares the advertiser in the collation of
// conversions_order's column, which conversions_advertiser cannot serve: to a planner without
// statistics (a new table) the two cost the same, and the plan it kept walked the advertiser's
// conversions. It repeats the index's predicate too (the index is partial).
var duplicates = func() (out [2][2]string) {
	const order = `COALESCE((SELECT (array_agg(o.id))[1] FROM conversions o WHERE lower(o.external_id) = lower($11)
		AND o.advertiser_id COLLATE "C" = $3 AND o.external_id <> '' AND o.affiliate_id <> $4), '')`
	const customer = `COALESCE((SELECT (array_agg(o.id))[1] FROM conversions o WHERE o.program_id = $2 AND o.customer_id = $21
		AND o.customer_id <> '' AND o.affiliate_id <> $4),
		(SELECT (array_agg(o.id))[1] FROM conversions o WHERE o.program_id = $2 AND o.customer_email_hash = $22
		AND o.affiliate_id <> $4), '')`
	for i, o := range []string{"''", order} {
		for j, c := range []string{"''", customer} {
			out[i][j] = o + ", " + c
		}
	}
	return out
}()

// queue is a batch that statements are queued in, to send in one round trip: its Exec
// queues and always succeeds, and the batch's Close reports the first failure.
type queue struct{ *pgx.Batch }

func (q queue) Exec(_ context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	q.Queue(sql, args...)
	return pgconn.CommandTag{}, nil
}

// errRepeat rolls back a registration whose external id a concurrent twin took.
var errRepeat = errors.New("repeated external id")

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func nullTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// validate checks the input that needs no lookup and fills the defaults.
func (s *Service) validate(in *NewConversion, now time.Time) error {
	externalID := freetext.Check(in.ExternalID, 1, MaxExternalID, false)
	customerID := ""
	if in.CustomerID != "" {
		customerID = freetext.Check(in.CustomerID, 1, MaxCustomerID, false)
	}
	switch {
	case in.ClickID == "" && in.CouponCode == "" && in.CustomerID == "":
		return invalid("click_id", "is required unless the conversion has a coupon_code or a customer_id")
	case in.ClickID != "" && !ids.Valid(ids.Click, in.ClickID) && !clickid.Signed(in.ClickID):
		return invalid("click_id", "must be the click id (clk_...) passed to the landing page")
	case in.ExternalID == "":
		return invalid("external_id", "is required: the order id, unique per program")
	case externalID != "":
		return invalid("external_id", "%s", externalID)
	case in.CouponCode != "" && !couponPattern.MatchString(in.CouponCode):
		return invalid("coupon_code", "must be 1 to 64 letters, digits, '_' or '-'")
	case customerID != "":
		return invalid("customer_id", "%s", customerID)
	case in.ProgramID != "" && !ids.Valid(ids.Program, in.ProgramID):
		return invalid("program_id", "must be a program id (prg_...)")
	}
	in.email = nil
	if in.CustomerEmail != "" {
		e, ok := fraud.ParseEmail(in.CustomerEmail)
		if !ok {
			return invalid("customer_email", "must be one e-mail address (name@domain) of at most %d characters", fraud.MaxEmail)
		}
		in.email = &e
	}
	if in.Type == "" {
		in.Type = TypeSale
	}
	if !slices.Contains(Types, in.Type) {
		return invalid("type", "must be one of %v", Types)
	}
	if in.Currency != "" && !money.ValidCurrency(in.Currency) {
		return invalid("currency", "must be an ISO 4217 code in upper case")
	}
	if in.Amount == "" {
		in.Amount = "0"
	}
	if in.OccurredAt.IsZero() {
		in.OccurredAt = now
	}
	in.OccurredAt = in.OccurredAt.UTC()
	switch {
	case in.OccurredAt.After(now.Add(s.skew)):
		return invalid("occurred_at", "is in the future")
	case !timebound.Contains(in.OccurredAt):
		// A coupon or customer conversion has no click to bound it: without this floor a time
		// before 1970 would wrap around in the statistics store and land on another day.
		return invalid("occurred_at", "%s", timebound.Message)
	}
	if len(in.Metadata) == 0 {
		in.Metadata = json.RawMessage(`{}`)
	}
	if len(in.Metadata) > MaxMetadata {
		return invalid("metadata", "must be at most %d bytes of JSON", MaxMetadata)
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(in.Metadata, &obj); err != nil || obj == nil || !utf8.Valid(in.Metadata) {
		return invalid("metadata", "must be a JSON object")
	}
	if in.Source == "" {
		in.Source = SourceAPI
	}
	return nil
}

// attribute finds the click and checks it may be credited by this advertiser. A click of
// another advertiser is answered exactly as a click that does not exist: saying more would
// tell one advertiser about another's traffic. So is a forged or altered id, and a plain one.
func (s *Service) attribute(ctx context.Context, advertiserID string, in NewConversion) (Click, error) {
	click, err := s.signedClick(ctx, in.ClickID)
	switch {
	case err != nil && !errors.Is(err, ErrClickNotFound):
		return Click{}, fmt.Errorf("%w: %w", ErrAttributionUnavailable, err)
	case err == nil && click.AdvertiserID == advertiserID:
		if in.ProgramID != "" && click.ProgramID != in.ProgramID {
			// The advertiser's own click, of another program: nothing of another company to hide.
			return Click{}, fmt.Errorf("%w: click %s is of another program", ErrUnknownClick, in.ClickID)
		}
		return click, nil
	}
	return Click{}, fmt.Errorf("%w: no click %s", ErrUnknownClick, in.ClickID)
}

// exchange converts amount (minor units of currency) into the program currency with the
// rate the advertiser keeps that is in force on the conversion's day. Only the rate of
// currency/program currency counts: the inverse pair is never inverted, as a rate read the
// other way round would be a rate nobody set (and its rounding one nobody chose).
func (s *Service) exchange(ctx context.Context, advertiserID string, amount int64, currency string, t terms, at time.Time) (*Exchange, error) {
	r, err := s.rates.InForce(ctx, advertiserID, currency, t.currency, at, t.rateAgeDays)
	if err != nil {
		return nil, err
	}
	converted, err := money.Convert(amount, currency, t.currency, r.Rate)
	if err != nil {
		return nil, invalid("amount", "is too large once converted to %s", t.currency)
	}
	return &Exchange{OriginalAmount: amount, OriginalCurrency: currency, Rate: r.Rate, RateDate: r.Day, ConvertedAmount: converted}, nil
}

// querier is a pool or a transaction.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

func (s *Service) byExternalID(ctx context.Context, q querier, programID, externalID string) (Conversion, error) {
	c, err := scanConversion(q.QueryRow(ctx, `SELECT `+conversionColumns+` FROM conversions v
		JOIN commissions c ON c.conversion_id = v.id WHERE v.program_id = $1 AND v.external_id = $2`, programID, externalID))
	if err != nil {
		return Conversion{}, fmt.Errorf("read conversion %s of program %s: %w", externalID, programID, err)
	}
	return c, nil
}

// Get returns one conversion the viewer may see.
func (s *Service) Get(ctx context.Context, v Viewer, id string) (Conversion, error) {
	c, err := scanConversion(s.db.QueryRow(ctx, `SELECT `+conversionColumns+` FROM conversions v
		JOIN commissions c ON c.conversion_id = v.id WHERE v.id = $1 AND v.`+v.column()+` = $2`, id, v.CompanyID))
	if err != nil {
		return Conversion{}, fmt.Errorf("read conversion %s: %w", id, err)
	}
	return c, nil
}

const conversionColumns = `v.id, v.program_id, v.advertiser_id, v.affiliate_id, COALESCE(v.partnership_id, ''),
	v.link_id, v.click_id, v.promotion_id, v.sub1, v.clicked_at, v.external_id, v.type, v.amount, v.currency,
	v.occurred_at, v.metadata, v.source, v.created_at, v.attribution, v.coupon_code, v.customer_id,
	(SELECT name FROM companies WHERE id = v.advertiser_id), (SELECT name FROM companies WHERE id = v.affiliate_id),
	COALESCE(v.click_country, ''), COALESCE(v.click_device_type, ''), ` + commissionColumns

func scanConversion(row pgx.Row) (Conversion, error) {
	var c Conversion
	var meta []byte
	var clickedAt *time.Time
	dst := append([]any{&c.ID, &c.ProgramID, &c.AdvertiserID, &c.AffiliateID, &c.PartnershipID, &c.LinkID,
		&c.ClickID, &c.PromotionID, &c.Sub1, &clickedAt, &c.ExternalID, &c.Type, &c.Amount, &c.Currency,
		&c.OccurredAt, &meta, &c.Source, &c.CreatedAt, &c.Attribution, &c.CouponCode, &c.CustomerID,
		&c.AdvertiserName, &c.AffiliateName, &c.Country, &c.DeviceType}, c.Commission.targets()...)
	if err := row.Scan(dst...); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return Conversion{}, ErrNotFound
		}
		return Conversion{}, err
	}
	c.Metadata = meta
	if clickedAt != nil {
		c.ClickedAt = *clickedAt
	}
	c.ClickedAt, c.OccurredAt, c.CreatedAt = c.ClickedAt.UTC(), c.OccurredAt.UTC(), c.CreatedAt.UTC()
	c.Commission.utc()
	c.Exchange = c.Commission.Exchange // the same snapshot, written with both
	return c, nil
}
