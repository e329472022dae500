// Package stats answers statistics queries (clicks, unique clicks, conversions by status,
// sale amount, commission, EPC, conversion rate) from the daily rollups that ingest's
// materialized views keep in ClickHouse, never from the raw clicks: a 30-day query reads a
// few thousand pre-summed rows whatever the traffic. docs/stats.md defines every figure.
package stats

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/partnerstream/partnerstream/internal/events"
	"github.com/partnerstream/partnerstream/internal/identity"
	"github.com/partnerstream/partnerstream/internal/money"
	"github.com/partnerstream/partnerstream/internal/timebound"
)

// GroupBy is the dimension of the rows.
type GroupBy string

// The groupings.
const (
	Day       GroupBy = "day"
	Program   GroupBy = "program"
	Affiliate GroupBy = "affiliate"
	Link      GroupBy = "link"
	Sub1      GroupBy = "sub1"
	// Attribution groups conversions by what attributed them (click, coupon, customer). A
	// click has no attribution, so its rows have no clicks.
	Attribution GroupBy = "attribution"
)

// Groupings lists every GroupBy, in the order the API documents them.
var Groupings = []GroupBy{Day, Program, Affiliate, Link, Sub1, Attribution}

// Range limits.
const (
	DefaultDays = 30
	MaxDays     = 400
)

// Scope is who asks: an advertiser sees the traffic of its programs, an affiliate its own.
type Scope struct {
	CompanyID string
	Kind      string // identity.Advertiser or identity.Affiliate
}

// ErrScope is returned for a scope that is neither an advertiser nor an affiliate.
var ErrScope = errors.New("stats: the caller is neither an advertiser nor an affiliate")

// Params select the rows. From and To are UTC days, both included; the time of day is
// ignored.
type Params struct {
	From, To  time.Time
	GroupBy   GroupBy
	ProgramID string
	// Currency restricts conversions and amounts to one currency. Empty takes every
	// currency the conversions in range have: amounts stay per currency (Row.Amounts), and
	// conversions are counted once whatever their currency.
	Currency string
}

// ParamError is invalid input, naming the parameter.
type ParamError struct {
	Field   string
	Message string
}

func (e *ParamError) Error() string { return "stats: " + e.Field + ": " + e.Message }

// Conversions counts conversions by the status of their commission now.
type Conversions struct {
	Pending, Approved, Rejected, Paid, Reversed int64
	// Total counts every status.
	Total int64
}

// Row is one group's figures. Only the fields of the grouping are set (a link row also
// carries its program and affiliate).
type Row struct {
	Day         time.Time
	ProgramID   string
	AffiliateID string
	LinkID      string
	Sub1        string
	Attribution string

	// Clicks leave out bots; UniqueClicks also leave out the clicks the tracker flagged as a
	// visitor's repeat.
	Clicks       int64
	UniqueClicks int64
	Conversions  Conversions
	// SaleAmount and Commission sum the conversions that earn (pending, approved, paid), in
	// minor units of Currency. Sums, because many amounts the API accepts exceed int64. They
	// are set when the range has one currency (or one was asked); with several, Currency is
	// empty, they are zero, and Amounts holds them.
	SaleAmount money.Sum
	Commission money.Sum
	// Currency of the amounts; empty when no conversion in range had one and none was
	// asked, or when the range has several.
	Currency string
	// Amounts are the amounts per currency: one entry for every currency of the range (the
	// same currencies in every row, sorted, zeros included). Never summed across currencies.
	Amounts []Amount
}

// Amount is a row's amounts in one currency.
type Amount struct {
	Currency   string
	SaleAmount money.Sum
	Commission money.Sum
}

// EPC is the commission in this currency per click of the row, rounded half up; 0 without
// clicks. With one currency it is Row.EPC.
func (a Amount) EPC(clicks int64) money.Sum {
	if clicks <= 0 {
		return money.Sum{}
	}
	return a.Commission.DivRound(clicks)
}

// Earning counts the conversions whose commission is or will be earned: pending, approved
// and paid. Rejected and reversed ones are counted by status but earn nothing.
func (r Row) Earning() int64 {
	return r.Conversions.Pending + r.Conversions.Approved + r.Conversions.Paid
}

// EPC is the commission per click in minor units, rounded half up; 0 without clicks.
func (r Row) EPC() money.Sum {
	return Amount{Commission: r.Commission}.EPC(r.Clicks)
}

// ConversionRate is earning conversions per click, rounded to 4 decimals; 0 without clicks.
func (r Row) ConversionRate() float64 {
	if r.Clicks <= 0 {
		return 0
	}
	return math.Round(float64(r.Earning())/float64(r.Clicks)*1e4) / 1e4
}

// Total sums rows into one with no group fields, per currency.
func Total(rows []Row) Row {
	var t Row
	for i, r := range rows {
		if i == 0 {
			t.Amounts = make([]Amount, len(r.Amounts))
			for j, a := range r.Amounts {
				t.Amounts[j].Currency = a.Currency
			}
		}
		t.add(r)
		t.Currency = r.Currency
		for j, a := range r.Amounts { // every row has the same currencies, in the same order
			t.Amounts[j].SaleAmount = t.Amounts[j].SaleAmount.Add(a.SaleAmount)
			t.Amounts[j].Commission = t.Amounts[j].Commission.Add(a.Commission)
		}
	}
	return t
}

func (r *Row) add(o Row) {
	r.Clicks += o.Clicks
	r.UniqueClicks += o.UniqueClicks
	r.Conversions.Pending += o.Conversions.Pending
	r.Conversions.Approved += o.Conversions.Approved
	r.Conversions.Rejected += o.Conversions.Rejected
	r.Conversions.Paid += o.Conversions.Paid
	r.Conversions.Reversed += o.Conversions.Reversed
	r.Conversions.Total += o.Conversions.Total
	r.SaleAmount = r.SaleAmount.Add(o.SaleAmount)
	r.Commission = r.Commission.Add(o.Commission)
}

// Options of the service.
type Options struct {
	// Now gives "today" for the default range.
	Now func() time.Time
}

// Service queries the rollups.
type Service struct {
	conn driver.Conn
	db   string
	now  func() time.Time
}

// New returns a service reading database, whose schema chstore.Migrate created.
func New(conn driver.Conn, database string, o Options) *Service {
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Service{conn: conn, db: database, now: o.Now}
}

// Resolve validates p and fills its defaults: group by day, and the last DefaultDays days
// up to today (UTC). A lone From runs to today; a lone To starts DefaultDays-1 days before.
func (s *Service) Resolve(p Params) (Params, error) {
	if p.GroupBy == "" {
		p.GroupBy = Day
	}
	if !slices.Contains(Groupings, p.GroupBy) {
		names := make([]string, len(Groupings))
		for i, g := range Groupings {
			names[i] = string(g)
		}
		return Params{}, &ParamError{"group_by", fmt.Sprintf("unknown grouping %q: use one of %s", p.GroupBy, strings.Join(names, ", "))}
	}
	if p.Currency != "" && !money.ValidCurrency(p.Currency) {
		return Params{}, &ParamError{"currency", fmt.Sprintf("%q is not an ISO 4217 currency code such as EUR", p.Currency)}
	}
	if p.To.IsZero() {
		p.To = s.now()
	}
	p.To = day(p.To)
	if p.From.IsZero() {
		p.From = p.To.AddDate(0, 0, -(DefaultDays - 1))
	}
	p.From = day(p.From)
	for _, d := range []struct {
		field string
		day   time.Time
	}{{"from", p.From}, {"to", p.To}} {
		if !timebound.Contains(d.day) {
			return Params{}, &ParamError{d.field, timebound.Message}
		}
	}
	if p.From.After(p.To) {
		return Params{}, &ParamError{"from", fmt.Sprintf("%s is after to (%s)", p.From.Format(time.DateOnly), p.To.Format(time.DateOnly))}
	}
	if n := days(p.From, p.To); n > MaxDays {
		return Params{}, &ParamError{"to", fmt.Sprintf("the range %s to %s spans %d days; at most %d are allowed",
			p.From.Format(time.DateOnly), p.To.Format(time.DateOnly), n, MaxDays)}
	}
	return p, nil
}

// hasDay reports whether key, a day as ClickHouse writes it, lies in the resolved range.
func (p Params) hasDay(key string) bool {
	d, err := time.Parse(time.DateOnly, key)
	return err == nil && !d.Before(p.From) && !d.After(p.To)
}

func day(t time.Time) time.Time {
	y, m, d := t.UTC().Date()
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
}

// days counts the days from..to, both included.
func days(from, to time.Time) int {
	return int(to.Sub(from).Hours()/24) + 1
}

// grouping says where a GroupBy's rows come from and how its key reads. Rows are grouped by
// a plain column and the key is formatted after aggregation; only a link needs its program
// and affiliate (any() of strings is not free on a million rows).
type grouping struct {
	clicksTable string // "": the grouping has no clicks
	convsTable  string
	column      string // GROUP BY
	key         string // SELECT, a String
	extra       string // SELECT, the program and affiliate of the group
	set         func(r *Row, key, program, affiliate string)
}

const noExtra = "'', ''"

var groupings = map[GroupBy]grouping{
	Day: {"clicks_daily", convsDaily, "day", "toString(day)", noExtra, func(r *Row, key, _, _ string) {
		r.Day, _ = time.Parse(time.DateOnly, key) // a day ClickHouse cannot show (0000-00-00) reads as zero: outside every range
	}},
	Program:   {"clicks_daily", convsDaily, "program_id", "program_id", noExtra, func(r *Row, key, _, _ string) { r.ProgramID = key }},
	Affiliate: {"clicks_daily", convsDaily, "affiliate_id", "affiliate_id", noExtra, func(r *Row, key, _, _ string) { r.AffiliateID = key }},
	Link: {"clicks_daily", convsDaily, "link_id", "link_id", "any(program_id), any(affiliate_id)", func(r *Row, key, program, affiliate string) {
		r.LinkID, r.ProgramID, r.AffiliateID = key, program, affiliate
	}},
	Sub1: {"clicks_daily_sub1", convsDaily, "sub1", "sub1", noExtra, func(r *Row, key, _, _ string) { r.Sub1 = key }},
	// ClickHouse migration 0006.
	Attribution: {"", "conversions_daily_attribution", "attribution", "attribution", noExtra, func(r *Row, key, _, _ string) { r.Attribution = key }},
}

const convsDaily = "conversions_daily"

var scopeColumns = map[string]string{
	identity.Advertiser: "advertiser_id",
	identity.Affiliate:  "affiliate_id",
}

// Query returns one row per group with traffic or conversions in range; grouped by day, every
// day of the range has a row, zeros included. Rows by day run in date order, the others by
// clicks, then commission, descending.
func (s *Service) Query(ctx context.Context, scope Scope, p Params) ([]Row, error) {
	p, where, args, err := s.scoped(scope, p)
	if err != nil {
		return nil, err
	}
	g := groupings[p.GroupBy]

	rows := map[string]*Row{}
	get := func(key, program, affiliate string) *Row {
		r, ok := rows[key]
		if !ok {
			r = &Row{}
			g.set(r, key, program, affiliate)
			rows[key] = r
		}
		return r
	}
	var clicks []clickFigures
	var convs []conversionFigures
	var clickErr, convErr error
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); clicks, clickErr = s.clicks(ctx, g, where, args) }()
	go func() { defer wg.Done(); convs, convErr = s.conversions(ctx, g, where, args, p.Currency) }()
	wg.Wait()
	if err := errors.Join(clickErr, convErr); err != nil {
		return nil, err
	}
	if p.GroupBy == Day {
		// Whatever is stored, a range yields only its own days: the condition compares days in
		// ClickHouse, where a time outside DateTime's range has wrapped onto another one.
		clicks = slices.DeleteFunc(clicks, func(c clickFigures) bool { return !p.hasDay(c.key) })
		convs = slices.DeleteFunc(convs, func(c conversionFigures) bool { return !p.hasDay(c.key) })
	}
	currencies := currenciesOf(p.Currency, convs)
	for _, c := range clicks {
		r := get(c.key, c.program, c.affiliate)
		r.Clicks += c.clicks
		r.UniqueClicks += c.unique
	}
	for _, c := range convs {
		if c.zero() {
			continue // nothing to add, e.g. the status a conversion left
		}
		r := get(c.key, c.program, c.affiliate)
		if r.Amounts == nil {
			r.Amounts = zeroAmounts(currencies)
		}
		c.addTo(r, &r.Amounts[slices.Index(currencies, c.currency)])
	}
	if p.GroupBy == Day {
		for d := p.From; !d.After(p.To); d = d.AddDate(0, 0, 1) {
			get(d.Format(time.DateOnly), "", "")
		}
	}
	out := make([]Row, 0, len(rows))
	for _, r := range rows {
		if r.Amounts == nil {
			r.Amounts = zeroAmounts(currencies)
		}
		if len(currencies) == 1 {
			r.Currency, r.SaleAmount, r.Commission = currencies[0], r.Amounts[0].SaleAmount, r.Amounts[0].Commission
		}
		out = append(out, *r)
	}
	sortRows(out, p.GroupBy)
	return out, nil
}

// scoped resolves p and builds the rollups' condition: the scope's company, the range and
// the program.
func (s *Service) scoped(scope Scope, p Params) (Params, string, []any, error) {
	col, ok := scopeColumns[scope.Kind]
	if !ok || scope.CompanyID == "" {
		return Params{}, "", nil, fmt.Errorf("%w (kind %q)", ErrScope, scope.Kind)
	}
	p, err := s.Resolve(p)
	if err != nil {
		return Params{}, "", nil, err
	}
	where := col + " = ? AND day >= toDate(?) AND day <= toDate(?)"
	args := []any{scope.CompanyID, p.From.Format(time.DateOnly), p.To.Format(time.DateOnly)}
	if p.ProgramID != "" {
		where += " AND program_id = ?"
		args = append(args, p.ProgramID)
	}
	return p, where, args, nil
}

func sortRows(rows []Row, g GroupBy) {
	if g == Day {
		slices.SortFunc(rows, func(a, b Row) int { return a.Day.Compare(b.Day) })
		return
	}
	key := func(r Row) string {
		return r.ProgramID + "\x00" + r.AffiliateID + "\x00" + r.LinkID + "\x00" + r.Sub1 + "\x00" + r.Attribution
	}
	slices.SortFunc(rows, func(a, b Row) int {
		switch {
		case a.Clicks != b.Clicks:
			return cmpDesc(a.Clicks, b.Clicks)
		case a.Commission != b.Commission:
			return b.Commission.Cmp(a.Commission)
		}
		return strings.Compare(key(a), key(b))
	})
}

func cmpDesc(a, b int64) int {
	if a > b {
		return -1
	}
	return 1
}

// currenciesOf is the asked currency, else the currencies conversions have, sorted.
func currenciesOf(asked string, convs []conversionFigures) []string {
	if asked != "" {
		return []string{asked}
	}
	var found []string
	for _, c := range convs {
		if !c.zero() && !slices.Contains(found, c.currency) {
			found = append(found, c.currency)
		}
	}
	slices.Sort(found)
	return found
}

// zeroAmounts are the amounts of a row without conversions: nil without currencies.
func zeroAmounts(currencies []string) []Amount {
	if len(currencies) == 0 {
		return nil
	}
	out := make([]Amount, len(currencies))
	for i, c := range currencies {
		out[i].Currency = c
	}
	return out
}

type clickFigures struct {
	key, program, affiliate string
	clicks, unique          int64
}

func (s *Service) clicks(ctx context.Context, g grouping, where string, args []any) ([]clickFigures, error) {
	if g.clicksTable == "" {
		return nil, nil
	}
	q := "SELECT " + g.key + ", " + g.extra + ", sum(clicks), sum(unique_clicks) FROM " +
		s.db + "." + g.clicksTable + " WHERE " + where + " GROUP BY " + g.column
	rows, err := s.conn.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("stats: query clicks: %w", err)
	}
	defer rows.Close()
	var out []clickFigures
	for rows.Next() {
		var f clickFigures
		var clicks, unique uint64
		if err := rows.Scan(&f.key, &f.program, &f.affiliate, &clicks, &unique); err != nil {
			return nil, fmt.Errorf("stats: read clicks: %w", err)
		}
		f.clicks, f.unique = int64(clicks), int64(unique)
		out = append(out, f)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("stats: read clicks: %w", err)
	}
	return out, nil
}

type conversionFigures struct {
	key, program, affiliate string
	currency, status        string
	count                   int64
	saleAmount, commission  money.Sum
}

func (c conversionFigures) zero() bool {
	return c.count == 0 && c.saleAmount == money.Sum{} && c.commission == money.Sum{}
}

// addTo counts the conversions in r and adds their amounts to a, r's amounts in their
// currency.
func (c conversionFigures) addTo(r *Row, a *Amount) {
	switch c.status {
	case events.CommissionPending:
		r.Conversions.Pending += c.count
	case events.CommissionApproved:
		r.Conversions.Approved += c.count
	case events.CommissionRejected:
		r.Conversions.Rejected += c.count
	case events.CommissionPaid:
		r.Conversions.Paid += c.count
	case events.CommissionReversed:
		r.Conversions.Reversed += c.count
	}
	r.Conversions.Total += c.count
	if slices.Contains(earningStatuses, c.status) {
		a.SaleAmount = a.SaleAmount.Add(c.saleAmount)
		a.Commission = a.Commission.Add(c.commission)
	}
}

// earningStatuses are the statuses whose commission is or will be earned: their amounts are
// summed. Rejected and reversed conversions are counted by status but earn nothing.
var earningStatuses = []string{events.CommissionPending, events.CommissionApproved, events.CommissionPaid}

// inCurrency narrows a conversions filter to currency, when one is asked.
func inCurrency(where string, args []any, currency string) (string, []any) {
	if currency == "" {
		return where, args
	}
	return where + " AND currency = ?", append(slices.Clip(args), currency)
}

func (s *Service) conversions(ctx context.Context, g grouping, where string, args []any, currency string) ([]conversionFigures, error) {
	where, args = inCurrency(where, args, currency)
	// The amounts are Decimal(38, 0) (migration 0005): read as text, as no Go integer holds them.
	q := "SELECT " + g.key + ", " + g.extra + ", currency, status, sum(conversions), toString(sum(sale_amount)), toString(sum(commission)) FROM " +
		s.db + "." + g.convsTable + " WHERE " + where + " GROUP BY " + g.column + ", currency, status"
	rows, err := s.conn.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("stats: query conversions: %w", err)
	}
	defer rows.Close()
	var out []conversionFigures
	for rows.Next() {
		var f conversionFigures
		var sale, commission string
		if err := rows.Scan(&f.key, &f.program, &f.affiliate, &f.currency, &f.status, &f.count, &sale, &commission); err != nil {
			return nil, fmt.Errorf("stats: read conversions: %w", err)
		}
		if f.saleAmount, err = money.ParseSum(sale); err != nil {
			return nil, fmt.Errorf("stats: read conversions: sale amount: %w", err)
		}
		if f.commission, err = money.ParseSum(commission); err != nil {
			return nil, fmt.Errorf("stats: read conversions: commission: %w", err)
		}
		out = append(out, f)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("stats: read conversions: %w", err)
	}
	return out, nil
}
