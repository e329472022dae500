package conversions

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/partnerstream/partnerstream/internal/freetext"
	"github.com/partnerstream/partnerstream/internal/ids"
	"github.com/partnerstream/partnerstream/internal/money"
	"github.com/partnerstream/partnerstream/internal/programs"
)

// What attributed a conversion (docs/conversions.md, "Customers, recurring commissions and
// coupon codes").
const (
	AttributionClick    = "click"
	AttributionCoupon   = "coupon"
	AttributionCustomer = "customer"
)

// Attributions lists them.
var Attributions = []string{AttributionClick, AttributionCoupon, AttributionCustomer}

// MaxCustomerID is the longest customer id, in characters.
const MaxCustomerID = 128

var couponPattern = programs.CouponCodePattern

var (
	// ErrUnknownCoupon: none of the advertiser's codes (of this program) is this one.
	ErrUnknownCoupon = errors.New("unknown coupon code")
	// ErrUnknownCustomer: the conversion names only a customer, and no partnership of the
	// advertiser's programs has that customer.
	ErrUnknownCustomer = errors.New("unknown customer")
	// ErrCustomerExpired: the conversion names only a customer whose binding has run out.
	ErrCustomerExpired = errors.New("the customer's binding has run out")
)

// touch is what puts a conversion on an affiliate: a click, a coupon code, or the customer's
// binding to the affiliate's partnership.
type touch struct {
	kind        string // an Attribution
	affiliateID string
	click       Click  // kind click
	coupon      string // kind coupon: the code as the advertiser wrote it
}

// terms are what the program says about a conversion.
type terms struct {
	programID       string
	currency        string
	windowDays      int
	rateAgeDays     int // how old an exchange rate may be (programs.DefaultMaxRateAgeDays)
	holdDays        *int
	attributionRule string
	customerDays    *int   // nil: bound for life
	rule            rule   // the program's; a partnership's override replaces it
	fraud           []byte // the program's stored fraud settings (fraud.ParseStored); nil: the defaults
	repeatOf        string // the conversion the external id already made in the program; empty: none
	leadAffiliate   string // the leading touch's affiliate, whose rule is leadRule
	leadRule        rule
}

// rule is the commission rule that applies to one partnership.
type rule struct {
	partnershipID string // empty when the affiliate has no partnership (any more)
	typ           string
	value         int64
	recurring     *programs.Recurring
	exempt        []string // the fraud rules switched off for the partnership
}

// covers reports whether the recurring part of the rule pays a conversion at at of a
// customer bound at boundAt: [boundAt, boundAt + months) or, for life, from boundAt on.
func (r rule) covers(boundAt, at time.Time) bool {
	switch {
	case r.recurring == nil || at.Before(boundAt):
		return false
	case r.recurring.Lifetime:
		return true
	}
	return at.Before(boundAt.AddDate(0, r.recurring.Months, 0))
}

// unknownOf is the error of a program that is not the caller's, by what the conversion named.
func unknownOf(in NewConversion) error {
	switch {
	case in.ClickID != "":
		return ErrUnknownClick
	case in.CouponCode != "":
		return ErrUnknownCoupon
	}
	return ErrUnknownCustomer
}

// touches finds what the conversion names, the click and the coupon code, and the program
// they (or, naming neither, the customer) belong to. Another advertiser's click, code or
// customer is answered as one that does not exist.
func (s *Service) touches(ctx context.Context, advertiserID string, in NewConversion, now time.Time) ([]touch, string, error) {
	var out []touch
	programID := in.ProgramID
	if in.ClickID != "" {
		click, err := s.attribute(ctx, advertiserID, in)
		if err != nil {
			return nil, "", err
		}
		out = append(out, touch{kind: AttributionClick, affiliateID: click.AffiliateID, click: click})
		programID = click.ProgramID
	}
	if in.CouponCode != "" {
		var k touch
		var codeProgram string
		err := s.db.QueryRow(ctx, `SELECT code, program_id, affiliate_id FROM coupon_codes
			WHERE advertiser_id = $1 AND lower(code) = lower($2)`, advertiserID, in.CouponCode).Scan(&k.coupon, &codeProgram, &k.affiliateID)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return nil, "", fmt.Errorf("%w: no code %s", ErrUnknownCoupon, in.CouponCode)
		case err != nil:
			return nil, "", fmt.Errorf("read coupon code: %w", err)
		case programID != "" && codeProgram != programID:
			return nil, "", fmt.Errorf("%w: the code %s is of another program than the click's or the one named", ErrUnknownCoupon, in.CouponCode)
		}
		k.kind, programID = AttributionCoupon, codeProgram
		out = append(out, k)
	}
	if programID != "" {
		return out, programID, nil
	}
	rows, _ := s.db.Query(ctx, `SELECT program_id FROM customers WHERE advertiser_id = $1 AND customer_id = $2
		ORDER BY program_id LIMIT 2`, advertiserID, in.CustomerID)
	found, err := pgx.CollectRows(rows, pgx.RowTo[string])
	switch {
	case err != nil:
		return nil, "", fmt.Errorf("read customer: %w", err)
	case len(found) == 0:
		return nil, "", fmt.Errorf("%w: no customer %s", ErrUnknownCustomer, in.CustomerID)
	case len(found) > 1:
		return nil, "", invalid("program_id", "is required: the customer is bound in more than one of your programs")
	}
	return out, found[0], nil
}

// lead is the touch that wins when the conversion names a click and a code of different
// affiliates: the coupon, typed at the checkout, is the newer touch and wins under
// last_click; the click came first and wins under first_affiliate. Nil for neither.
func lead(cands []touch, attributionRule string) *touch {
	switch {
	case len(cands) == 0:
		return nil
	case len(cands) == 2 && cands[0].affiliateID != cands[1].affiliateID && attributionRule == programs.LastClick:
		return &cands[1]
	}
	return &cands[0]
}

// terms reads the program; one that is not the advertiser's is unknown. The same statement
// reads, to spare registration two round trips, the conversion externalID already made in the
// program (a repeat, answered with it) and the partnership of affiliateID, the leading touch's
// affiliate, which the conversion is most often credited to (empty: none).
func (s *Service) terms(ctx context.Context, advertiserID, programID string, unknown error, externalID, affiliateID string) (terms, error) {
	t := terms{programID: programID, leadAffiliate: affiliateID}
	var months *int
	var lifetime bool
	var p partnershipRow
	err := s.db.QueryRow(ctx, `SELECT p.currency, p.attribution_window_days, p.max_rate_age_days, p.hold_days, p.commission_type,
		p.commission_value, p.attribution_rule, p.customer_window_days, p.recurring_months, p.recurring_lifetime,
		(SELECT rules FROM fraud_settings WHERE program_id = p.id),
		COALESCE((SELECT id FROM conversions WHERE program_id = p.id AND external_id = $3), ''),
		`+partnershipColumns+`
		FROM programs p LEFT JOIN partnerships s ON s.program_id = p.id AND s.affiliate_id = $4
		WHERE p.id = $1 AND p.advertiser_id = $2`, programID, advertiserID, externalID, affiliateID).
		Scan(append([]any{&t.currency, &t.windowDays, &t.rateAgeDays, &t.holdDays, &t.rule.typ, &t.rule.value, &t.attributionRule,
			&t.customerDays, &months, &lifetime, &t.fraud, &t.repeatOf}, p.targets()...)...)
	if errors.Is(err, pgx.ErrNoRows) {
		return terms{}, fmt.Errorf("%w: the program %s is not one of yours", unknown, programID)
	}
	if err != nil {
		return terms{}, fmt.Errorf("read program %s: %w", programID, err)
	}
	t.rule.recurring = programs.RecurringFrom(months, lifetime)
	t.leadRule = p.over(t.rule)
	return t, nil
}

// partnershipColumns read a partnership s (NULLs when there is none) for partnershipRow.
const partnershipColumns = `s.id, s.commission_type, s.commission_value, s.recurring_months, s.recurring_lifetime,
	ARRAY(SELECT code FROM fraud_exemptions WHERE partnership_id = s.id)`

// partnershipRow is what partnershipColumns read.
type partnershipRow struct {
	id, typ  *string
	value    *int64
	months   *int
	lifetime *bool
	exempt   []string
}

func (p *partnershipRow) targets() []any {
	return []any{&p.id, &p.typ, &p.value, &p.months, &p.lifetime, &p.exempt}
}

// over is the partnership's rule: its override of the program's rule r, or r.
func (p partnershipRow) over(r rule) rule {
	if p.id == nil {
		return r
	}
	r.partnershipID, r.exempt = *p.id, p.exempt
	if p.typ != nil && p.value != nil {
		r.typ, r.value, r.recurring = *p.typ, *p.value, programs.RecurringFrom(p.months, p.lifetime != nil && *p.lifetime)
	}
	return r
}

// ruleOf is the rule of the affiliate's partnership: its override, or the program's rule.
// The leading touch's affiliate's was read with the terms.
func (t terms) ruleOf(ctx context.Context, q querier, affiliateID string) (rule, error) {
	if affiliateID == t.leadAffiliate && affiliateID != "" {
		return t.leadRule, nil
	}
	var p partnershipRow
	err := q.QueryRow(ctx, `SELECT `+partnershipColumns+` FROM partnerships s WHERE s.program_id = $1 AND s.affiliate_id = $2`,
		t.programID, affiliateID).Scan(p.targets()...)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return rule{}, fmt.Errorf("read partnership: %w", err)
	}
	return p.over(t.rule), nil
}

// check checks the conversion against its click and the program, and reads its amount in the
// program currency: converted, with the snapshot of the rate, when it was reported in another.
func (s *Service) check(ctx context.Context, advertiserID string, in NewConversion, cands []touch, t terms) (int64, *Exchange, error) {
	for _, k := range cands {
		if k.kind == AttributionClick {
			if err := inWindow(k.click, in.OccurredAt, t.windowDays); err != nil {
				return 0, nil, err
			}
		}
	}
	currency := cmp.Or(in.Currency, t.currency)
	amount, err := money.Parse(in.Amount, currency)
	if err != nil {
		return 0, nil, invalid("amount", "must be a non-negative decimal with at most %d decimals for %s", money.Exponent(currency), currency)
	}
	if currency == t.currency {
		return amount, nil, nil
	}
	ex, err := s.exchange(ctx, advertiserID, amount, currency, t, in.OccurredAt)
	if err != nil {
		return 0, nil, err
	}
	return ex.ConvertedAmount, ex, nil
}

// inWindow checks that a conversion at at falls within the attribution window of click.
func inWindow(click Click, at time.Time, windowDays int) error {
	// ClickHouse keeps the click time truncated to the second, and an advertiser may send
	// occurred_at in whole seconds: a conversion in the click's own second is never taken
	// for one before it, whichever store the click time came from.
	if at.Before(click.OccurredAt.Truncate(time.Second)) {
		return fmt.Errorf("%w: the conversion occurred before the click (%s)", ErrClickExpired, click.OccurredAt.Format(time.RFC3339))
	}
	if at.Sub(click.OccurredAt) > time.Duration(windowDays)*24*time.Hour {
		return fmt.Errorf("%w: the click was at %s and the window is %d days",
			ErrClickExpired, click.OccurredAt.Format(time.RFC3339), windowDays)
	}
	return nil
}

// bind decides the touch that wins the conversion with the customer's binding, in tx, and
// binds the customer when this conversion is its first (or takes it over). first says so, and
// boundAt is when the binding that pays this conversion started.
//
// Concurrent conversions of one customer are safe through the customers primary key: the
// insert of a new binding waits for a concurrent one and then does nothing, and the row
// lock that follows orders every later decision on the customer.
func bind(ctx context.Context, tx pgx.Tx, advertiserID, conversionID string, t terms, in NewConversion, lead *touch) (won touch, first bool, boundAt time.Time, err error) {
	if in.CustomerID == "" {
		return *lead, true, in.OccurredAt, nil
	}
	if lead != nil {
		tag, err := tx.Exec(ctx, `INSERT INTO customers (program_id, customer_id, advertiser_id, affiliate_id, first_conversion_id, bound_at)
			VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (program_id, customer_id) DO NOTHING`,
			t.programID, in.CustomerID, advertiserID, lead.affiliateID, conversionID, in.OccurredAt)
		if err != nil {
			return touch{}, false, time.Time{}, fmt.Errorf("bind customer: %w", err)
		}
		if tag.RowsAffected() == 1 {
			return *lead, true, in.OccurredAt, nil
		}
	}
	bound := touch{kind: AttributionCustomer}
	err = tx.QueryRow(ctx, `SELECT affiliate_id, bound_at FROM customers WHERE program_id = $1 AND customer_id = $2 FOR UPDATE`,
		t.programID, in.CustomerID).Scan(&bound.affiliateID, &boundAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return touch{}, false, time.Time{}, fmt.Errorf("%w: no customer %s in program %s", ErrUnknownCustomer, in.CustomerID, t.programID)
	}
	if err != nil {
		return touch{}, false, time.Time{}, fmt.Errorf("read customer: %w", err)
	}
	boundAt = boundAt.UTC()
	active := t.customerDays == nil || in.OccurredAt.Before(boundAt.AddDate(0, 0, *t.customerDays))
	switch {
	case lead == nil && !active:
		return touch{}, false, time.Time{}, fmt.Errorf("%w: customer %s was bound at %s and the customer window is %d days",
			ErrCustomerExpired, in.CustomerID, boundAt.Format(time.RFC3339), *t.customerDays)
	case lead == nil:
		return bound, false, boundAt, nil
	case active && lead.affiliateID == bound.affiliateID:
		return *lead, false, boundAt, nil
	case active && t.attributionRule == programs.FirstAffiliate:
		return bound, false, boundAt, nil
	}
	// The touch takes the customer over: the binding ran out, or the program says last_click.
	if _, err := tx.Exec(ctx, `UPDATE customers SET affiliate_id = $3, first_conversion_id = $4, bound_at = $5
		WHERE program_id = $1 AND customer_id = $2`, t.programID, in.CustomerID, lead.affiliateID, conversionID, in.OccurredAt); err != nil {
		return touch{}, false, time.Time{}, fmt.Errorf("rebind customer: %w", err)
	}
	return *lead, true, in.OccurredAt, nil
}

// build makes the conversion the touch won, with its commission under rule r: the rule's
// amount if it earns, else zero.
func build(id, advertiserID string, in NewConversion, won touch, t terms, r rule, amount int64, ex *Exchange, earns bool, now time.Time) (Conversion, error) {
	commission := int64(0)
	if earns {
		var err error
		if commission, err = commissionAmount(r.typ, r.value, amount); err != nil {
			return Conversion{}, err
		}
	}
	c := Conversion{
		ID: id, ProgramID: t.programID, AdvertiserID: advertiserID, AffiliateID: won.affiliateID, PartnershipID: r.partnershipID,
		ExternalID: in.ExternalID, Type: in.Type, Amount: amount, Currency: t.currency, OccurredAt: in.OccurredAt,
		Metadata: in.Metadata, Source: in.Source, CreatedAt: now, Attribution: won.kind, CouponCode: won.coupon, CustomerID: in.CustomerID,
		Exchange: ex,
	}
	if won.kind == AttributionClick {
		k := won.click
		c.LinkID, c.ClickID, c.PromotionID, c.Sub1, c.ClickedAt = k.LinkID, k.ID, k.PromotionID, freetext.Clean(k.Sub1), k.OccurredAt
	}
	c.Commission = Commission{
		ID: ids.New(ids.Commission), ConversionID: c.ID, ProgramID: c.ProgramID, AdvertiserID: advertiserID, AffiliateID: c.AffiliateID,
		OccurredAt: c.OccurredAt, Amount: commission, Currency: t.currency,
		RuleType: r.typ, RuleValue: r.value, Status: Pending, Version: 1, CreatedAt: now, UpdatedAt: now,
		Exchange: ex,
	}
	if t.holdDays != nil {
		h := now.Add(time.Duration(*t.holdDays) * 24 * time.Hour)
		c.Commission.HoldUntil = &h
	}
	return c, nil
}
