// Package stats answers statistics queries (clicks, unique clicks, conversions by status,
// sale amount, commission, EPC, conversion rate) from the rollups that ingest's materialized
// views keep in ClickHouse: a 30-day query reads a few thousand pre-summed rows whatever the
// traffic. What no rollup holds (a filter on a large dimension, the partial UTC days of a
// range in another zone) comes from the clicks' narrow copy (migration 0017) and the
// conversion changes. docs/stats.md defines every figure.
package stats

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	// The zones of the tz parameter, whatever the host or image has in /usr/share/zoneinfo.
	_ "time/tzdata"

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
	// Hour is the hours of the range in the caller's time zone, every one of them.
	Hour GroupBy = "hour"
)

// Groupings lists every GroupBy, in the order the API documents them.
var Groupings = append([]GroupBy{Day, Program, Affiliate, Link, Sub1, Attribution, Hour}, OriginGroupings...)

// Range limits. A range grouped by hour spans at most MaxHourDays days (744 rows).
const (
	DefaultDays = 30
	MaxDays     = 400
	MaxHourDays = 31
)

// Scope is who asks: an advertiser sees the traffic of its programs, an affiliate its own.
type Scope struct {
	CompanyID string
	Kind      string // identity.Advertiser or identity.Affiliate
}

// ErrScope is returned for a scope that is neither an advertiser nor an affiliate.
var ErrScope = errors.New("stats: the caller is neither an advertiser nor an affiliate")

// Params select the rows. From and To are days of the caller's time zone, both included;
// the time of day is ignored.
type Params struct {
	From, To time.Time
	// TZ is the caller's time zone, an IANA name; empty is UTC. Resolve sets Location from it.
	TZ        string
	Location  *time.Location
	GroupBy   GroupBy
	ProgramID string
	// Currency restricts conversions and amounts to one currency. Empty takes every
	// currency the conversions in range have: amounts stay per currency (Row.Amounts), and
	// conversions are counted once whatever their currency.
	Currency string
	// Where narrows the report to the clicks of one origin and their conversions: a value
	// for some of Filters, by name ("country": "DE", "hosting": "false").
	Where   map[string]string
	filters []filter
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
	// Day is a date (at midnight UTC, whatever the zone). Hour is the start of an hour, in the
	// caller's zone.
	Day         time.Time
	Hour        time.Time
	ProgramID   string
	AffiliateID string
	LinkID      string
	Sub1        string
	Attribution string
	// Where the group's clicks come from, for the groupings by it; "" (0 for ASN) is a value
	// ingest could not tell, or clicks and conversions from before it could.
	Country, Region, City string
	ASN                   uint32
	ASOrg                 string
	Device, Browser, OS   string
	Referrer              string
	UTMSource             string
	UTMCampaign           string

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

// Resolve validates p and fills its defaults: group by day, in UTC, and the last DefaultDays
// days up to today (in the caller's zone). A lone From runs to today; a lone To starts
// DefaultDays-1 days before.
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
	loc, err := location(p.TZ)
	if err != nil {
		return Params{}, err
	}
	if p.filters, err = resolveFilters(p.Where); err != nil {
		return Params{}, err
	}
	p.Location = loc
	if p.To.IsZero() {
		p.To = s.now().In(loc)
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
	most, by := MaxDays, ""
	if p.GroupBy == Hour {
		most, by = MaxHourDays, " grouped by hour"
	}
	if n := days(p.From, p.To); n > most {
		return Params{}, &ParamError{"to", fmt.Sprintf("the range %s to %s spans %d days; at most %d are allowed%s",
			p.From.Format(time.DateOnly), p.To.Format(time.DateOnly), n, most, by)}
	}
	if p.GroupBy == Day || p.GroupBy == Hour {
		// The quarter-hour rollups cut time into quarters of UTC hours: a day or hour that does
		// not start on one (a zone's offset before 1980 in a few places) cannot be summed exactly.
		for _, b := range p.buckets() {
			if b.start.Unix()%quarter != 0 {
				return Params{}, &ParamError{"tz", fmt.Sprintf("%s starts a %s at %s, not on a quarter hour of UTC: reports by %s in it are not kept",
					loc, p.GroupBy, b.start.In(loc).Format(time.RFC3339), p.GroupBy)}
			}
		}
	}
	return p, nil
}

// location is the zone named tz: UTC when empty.
func location(tz string) (*time.Location, error) {
	if tz == "" || tz == "UTC" {
		return time.UTC, nil
	}
	// "Local" is this server's zone, which means nothing to a caller.
	loc, err := time.LoadLocation(tz)
	if err != nil || tz == "Local" {
		return nil, &ParamError{"tz", fmt.Sprintf("must be one of the IANA time zone names, such as Europe/Berlin or Asia/Kolkata; %q is not", tz)}
	}
	return loc, nil
}

// quarter is the step of the quarter-hour rollups, in seconds.
const quarter = 15 * 60

// hasDay reports whether key, a day as ClickHouse writes it, lies in the resolved range.
func (p Params) hasDay(key string) bool {
	d, err := time.Parse(time.DateOnly, key)
	return err == nil && !d.Before(p.From) && !d.After(p.To)
}

// day is t's date, at midnight UTC.
func day(t time.Time) time.Time {
	y, m, d := t.Date()
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
}

// days counts the days from..to, both included.
func days(from, to time.Time) int {
	return int(to.Sub(from).Hours()/24) + 1
}

// midnight is the instant date d starts in loc.
func midnight(d time.Time, loc *time.Location) time.Time {
	return time.Date(d.Year(), d.Month(), d.Day(), 0, 0, 0, 0, loc)
}

// span is the resolved range as instants: from the first day's start to the day after the
// last one's, in the caller's zone.
func (p Params) span() (start, end time.Time) {
	return midnight(p.From, p.Location), midnight(p.To.AddDate(0, 0, 1), p.Location)
}

// bucket is a row of the day or hour groupings: its start, and its key.
type bucket struct {
	start time.Time
	key   string
}

// buckets are the rows of the day or hour groupings, in order: each runs to the next one's
// start, the last to the end of the range. Hours are consecutive hours from the first day's
// start, keyed by their local start with its offset, so the hour a change to daylight saving
// time repeats has two rows and the one it skips none.
func (p Params) buckets() []bucket {
	var out []bucket
	if p.GroupBy == Hour {
		start, end := p.span()
		for t := start; t.Before(end); t = t.Add(time.Hour) {
			out = append(out, bucket{t, t.In(p.Location).Format(time.RFC3339)})
		}
		return out
	}
	for d := p.From; !d.After(p.To); d = d.AddDate(0, 0, 1) {
		out = append(out, bucket{midnight(d, p.Location), d.Format(time.DateOnly)})
	}
	return out
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
	// The quarter-hour rollups (migration 0010), summed into the caller's hours (plan.quarters).
	Hour: {"clicks_quarterly", "conversions_quarterly", "quarter", "toString(toUInt32(quarter))", noExtra, func(r *Row, key, _, _ string) {
		r.Hour, _ = time.Parse(time.RFC3339, key)
	}},
}

const convsDaily = "conversions_daily"

// asStrings selects the columns of a list ("program_id, link_id") as Strings under their own
// names: the narrow clicks keep them as LowCardinality, which ClickHouse 18.16's UNION ALL
// does not mix with the rollups' String.
func asStrings(columns string) string {
	var out []string
	for _, c := range strings.Split(columns, ", ") {
		out = append(out, "CAST("+c+" AS String) AS "+c)
	}
	return strings.Join(out, ", ")
}

// weeklyRollups are the weekly rollups beside the conversions' daily rollups by origin
// (migration 0016), which a report reads for the whole weeks of its range: a week's row per
// value rather than seven days' rows, which for a large dimension (city, AS, UTM) are
// thousands a day. The clicks' have none: their views cost ingest too much (docs/stats.md).
var weeklyRollups = map[string]string{
	"conversions_origin_daily": "conversions_origin_weekly",
	convsOriginSmall:           "conversions_origin_small_weekly",
}

// smallOriginTables are the rollups of the small dimensions side by side, each read as one
// column's values (smallOriginColumns) under the filters of the others.
var smallOriginTables = map[string]bool{
	clicksOriginSmall: true, convsOriginSmall: true, "conversions_origin_small_weekly": true,
}

// weeks are the whole weeks (Monday to Sunday, as ClickHouse's toMonday) within the days
// [lo, hi): from the Monday w0 to the Monday w1, excluded; none when w0 is not before w1.
func weeks(lo, hi time.Time) (w0, w1 time.Time) {
	w0 = lo.AddDate(0, 0, (8-int(lo.Weekday()))%7)
	w1 = hi.AddDate(0, 0, -((int(hi.Weekday()) + 6) % 7))
	return w0, w1
}

// clicksOriginSmall is the rollup of the clicks' small dimensions side by side (migrations
// 0013, 0015), and smallOriginColumns its column of each: a report by one of them sums its
// combinations with the others, and clicks_origin_daily holds the large dimensions only.
const clicksOriginSmall = "clicks_origin_small_daily"

var smallOriginColumns = map[GroupBy]string{Country: "CAST(country AS String)", Device: "device_type", Browser: "browser", OS: "os"}

// convsOriginSmall is the conversions' rollup of the small dimensions side by side (migration
// 0015), which the filtered reports read (smallFiltered); the unfiltered ones read the long
// form of conversions_origin_daily.
const convsOriginSmall = "conversions_origin_small_daily"

// smallFilters are the filters whose columns the small dimensions' rollups hold (migration 0015).
var smallFilters = []string{"country", "device_type", "browser", "os", "hosting"}

// smallFiltered says whether a filtered report is a sum over the small dimensions' rollups:
// every filter is on one of their columns, and the rows are one of them or UTC days (the
// rollups are daily and hold no program, affiliate or link). The others read the raw rows.
func smallFiltered(p Params) bool {
	if len(p.filters) == 0 || p.ProgramID != "" {
		return false
	}
	for _, f := range p.filters {
		if !slices.Contains(smallFilters, f.column) {
			return false
		}
	}
	return smallOriginColumns[p.GroupBy] != "" || p.GroupBy == Day && utcAligned(p)
}

// The figures of a daily rollup's rows, and the same summed from raw clicks or conversion
// changes as the materialized views sum them (by the rollup's columns and rawGroup: the raw
// rows are summed before the union, which then adds thousands of rows rather than a day's
// clicks).
const (
	clickSums    = "clicks, unique_clicks"
	rawClickSums = "count() AS clicks, countIf(is_duplicate = 0) AS unique_clicks"
	convSums     = "currency, status, conversions, sale_amount, commission"
	rawConvSums  = "currency, status, sum(toInt64(sign)) AS conversions, sum(toDecimal128(sign * amount, 0)) AS sale_amount, sum(toDecimal128(sign * commission, 0)) AS commission"
	rawConvGroup = ", currency, status"
	// quarterlyScope is the company column of the rollups that hold each row under its
	// advertiser and again under its affiliate (0010, 0012).
	quarterlyScope = "company_id"
)

var scopeColumns = map[string]string{
	identity.Advertiser: "advertiser_id",
	identity.Affiliate:  "affiliate_id",
}

// source is what a query reads: a table with its condition, or a subquery (FROM source GROUP
// BY ...).
type source struct {
	from string
	args []any
}

// plan is a resolved query: its parameters, its grouping and the sources of its clicks and
// conversions (convsAll without the currency filter).
type plan struct {
	p                       Params
	g                       grouping
	clicks, convs, convsAll source
	// quarters says the sources are the quarter-hour rollups, keyed by quarter, to be summed
	// into p's buckets (plan.bucketed).
	quarters bool
}

// plan resolves p and picks the sources of its figures. Whole UTC days come from the daily
// rollups, as they are stored. A range of the caller's days that starts or ends within a UTC
// day (any zone but UTC and its like) is read, grouped by day or hour, from the quarter-hour
// rollups, and in the other groupings as its whole UTC days from the daily rollups plus the
// narrow clicks and conversion changes of the partial days at its edges: less than a day in
// all, one primary-key range of each raw table per edge. The rollups by origin are read by
// week for a range's whole weeks; filtered reports read the small dimensions' rollups when
// those hold the filters and the grouping (smallFiltered), and the raw rows otherwise
// (rawPlan).
func (s *Service) plan(scope Scope, p Params) (plan, error) {
	col, ok := scopeColumns[scope.Kind]
	if !ok || scope.CompanyID == "" {
		return plan{}, fmt.Errorf("%w (kind %q)", ErrScope, scope.Kind)
	}
	p, err := s.Resolve(p)
	if err != nil {
		return plan{}, err
	}
	g, dim := dimensionGroupings[p.GroupBy]
	small := smallFiltered(p)
	// The rollups by origin hold no program (migration 0012): one program's report by origin
	// reads its clicks from the narrow copy, by the advertiser's days.
	if len(p.filters) > 0 && !small || dim && p.ProgramID != "" {
		if !dim {
			g = groupings[p.GroupBy]
		}
		return s.rawPlan(scope, p, g), nil
	}
	// The daily rollups' scope column and condition; the columns their rows and the raw rows of
	// a range's partial days at its edges (plan.edges) select, to be summed together: the
	// grouping's own, which every rollup of it holds; and what the raw rows select and group
	// by, if the rollup names them otherwise.
	dailyScope, dailyCond, dailyArgs := col, "", []any(nil)
	cols := rawColumns[p.GroupBy]
	var rawSelect, rawGroupBy string
	if dim {
		cols = "value"
		// ClickHouse migration 0012: one dimension's range of the rollups by origin.
		rawSelect, rawGroupBy = g.key+" AS value", "value"
		g = grouping{clicksTable: "clicks_origin_daily", convsTable: "conversions_origin_daily", column: "value", key: "value", extra: noExtra, set: g.set}
		if smallOriginColumns[p.GroupBy] != "" {
			g.clicksTable = clicksOriginSmall
		}
		if small {
			g.convsTable = convsOriginSmall
		}
		dailyScope, dailyCond, dailyArgs = quarterlyScope, " AND dimension = ?", []any{string(p.GroupBy)}
	} else {
		g = groupings[p.GroupBy]
		if small { // by UTC day (smallFiltered)
			g.clicksTable, g.convsTable = clicksOriginSmall, convsOriginSmall
		}
	}
	// The filters, as conditions on the small dimensions' rollups (the raw rows of the edges
	// name their columns alike, rawCondition).
	filterCond, filterArgs := filterCondition(p.filters)
	pl := plan{p: p, g: g}
	start, end := p.span()
	lo, hi := utcDay(start), utcDay(end)
	if lo.Before(start) {
		lo = lo.AddDate(0, 0, 1)
	}
	if p.GroupBy == Day && !utcAligned(p) || p.GroupBy == Hour {
		if p.GroupBy == Day {
			g = groupings[Hour]
			g.set = groupings[Day].set
			pl.g = g
		}
		pl.quarters = true
		cond := quarterlyScope + " = ? AND quarter >= toDateTime(?) AND quarter < toDateTime(?)"
		args := []any{scope.CompanyID, start.Unix(), end.Unix()}
		cond, args = p.inProgram(cond, args)
		pl.clicks = source{s.db + "." + g.clicksTable + " WHERE " + cond, args}
		pl.convsAll = source{s.db + "." + g.convsTable + " WHERE " + cond, args}
		cond, args = inCurrency(cond, args, p.Currency)
		pl.convs = source{s.db + "." + g.convsTable + " WHERE " + cond, args}
		return pl, nil
	}
	// The whole UTC days [lo, hi) from the rollups, the rest [start, end) from the raw rows.
	var edges [][2]time.Time
	switch {
	case !lo.Before(hi): // no whole UTC day
		edges = append(edges, [2]time.Time{start, end})
	default:
		if start.Before(lo) {
			edges = append(edges, [2]time.Time{start, lo})
		}
		if hi.Before(end) {
			edges = append(edges, [2]time.Time{hi, end})
		}
	}
	// The rollup's rows of the days [from, to), read by date column at (day, or a weekly
	// rollup's week).
	rollup := func(table, at, sums, currency string, from, to time.Time) (string, []any) {
		dates := " AND " + at + " >= toDate(?) AND " + at + " <= toDate(?)"
		dateArgs := []any{from.Format(time.DateOnly), to.AddDate(0, 0, -1).Format(time.DateOnly)}
		if smallOriginTables[table] {
			cond := quarterlyScope + " = ?" + dates + filterCond
			args := append(append([]any{scope.CompanyID}, dateArgs...), filterArgs...)
			cond, args = inCurrency(cond, args, currency)
			if p.GroupBy == Day {
				return s.db + "." + table + " WHERE " + cond, args
			}
			// One column of the small dimensions' rollup, as the value the others' rows are keyed by.
			return "(SELECT " + smallOriginColumns[p.GroupBy] + " AS value, " + sums + " FROM " + s.db + "." + table + " WHERE " + cond + ")", args
		}
		cond := dailyScope + " = ?" + dailyCond + dates
		args := append(append([]any{scope.CompanyID}, dailyArgs...), dateArgs...)
		cond, args = p.inProgram(cond, args)
		cond, args = inCurrency(cond, args, currency)
		return s.db + "." + table + " WHERE " + cond, args
	}
	// The whole UTC days [lo, hi): the whole weeks among them from the weekly rollup, if the
	// table has one (migration 0016), the days around them from the daily one.
	daily := func(table, sums, currency string) (string, []any) {
		weekly := weeklyRollups[table]
		w0, w1 := weeks(lo, hi)
		if weekly == "" || p.GroupBy == Day || !w0.Before(w1) {
			return rollup(table, "day", sums, currency, lo, hi)
		}
		var parts []string
		var args []any
		add := func(table, at string, from, to time.Time) {
			if from.Before(to) {
				f, a := rollup(table, at, sums, currency, from, to)
				parts, args = append(parts, "SELECT "+cols+", "+sums+" FROM "+f), append(args, a...)
			}
		}
		add(table, "day", lo, w0)
		add(weekly, "week", w0, w1)
		add(table, "day", w1, hi)
		return "(" + strings.Join(parts, " UNION ALL ") + ")", args
	}
	src := func(table, sums, raw, rawSums, rawGroup, currency string) source {
		if len(edges) == 0 {
			from, args := daily(table, sums, currency)
			return source{from, args}
		}
		var parts []string
		var args []any
		if lo.Before(hi) {
			from, a := daily(table, sums, currency)
			parts, args = append(parts, "SELECT "+cols+", "+sums+" FROM "+from), a
		}
		cond, rawArgs := p.rawCondition(scope, raw, edges, currency)
		selected, groupBy := asStrings(cols), cols
		if rawSelect != "" {
			selected, groupBy = rawSelect, rawGroupBy
		}
		parts = append(parts, "SELECT "+selected+", "+rawSums+" FROM "+s.db+"."+raw+" WHERE "+cond+" GROUP BY "+groupBy+rawGroup)
		return source{"(" + strings.Join(parts, " UNION ALL ") + ")", append(args, rawArgs...)}
	}
	if g.clicksTable != "" {
		pl.clicks = src(g.clicksTable, clickSums, rawClicks, rawClickSums, "", "")
	}
	pl.convs = src(g.convsTable, convSums, rawConversions, rawConvSums, rawConvGroup, p.Currency)
	pl.convsAll = src(g.convsTable, convSums, rawConversions, rawConvSums, rawConvGroup, "")
	return pl, nil
}

// utcDay is the UTC day t falls in, at its start.
func utcDay(t time.Time) time.Time {
	return day(t.UTC())
}

// inProgram narrows a condition to the asked program, if any.
func (p Params) inProgram(cond string, args []any) (string, []any) {
	if p.ProgramID == "" {
		return cond, args
	}
	return cond + " AND program_id = ?", append(slices.Clip(args), p.ProgramID)
}

// bucketed sums figures keyed by quarter (the quarter-hour rollups' key, seconds since 1970)
// into the plan's buckets, keyed as the buckets are. Quarters outside the range are dropped.
func (pl plan) bucketed(clicks []clickFigures, convs []conversionFigures) ([]clickFigures, []conversionFigures) {
	bs := pl.p.buckets()
	_, end := pl.p.span()
	find := func(key string) (string, bool) {
		sec, err := strconv.ParseInt(key, 10, 64)
		if err != nil {
			return "", false
		}
		at := time.Unix(sec, 0)
		if !at.Before(end) {
			return "", false
		}
		i, _ := slices.BinarySearchFunc(bs, at, func(b bucket, t time.Time) int { return b.start.Compare(t) })
		if i == len(bs) || !bs[i].start.Equal(at) {
			i-- // at falls within the bucket before
		}
		if i < 0 {
			return "", false
		}
		return bs[i].key, true
	}
	at := map[string]int{} // the index in cs of a bucket's clicks
	var cs []clickFigures
	for _, c := range clicks {
		k, ok := find(c.key)
		if !ok {
			continue
		}
		if i, ok := at[k]; ok {
			cs[i].clicks += c.clicks
			cs[i].unique += c.unique
			continue
		}
		at[k] = len(cs)
		cs = append(cs, clickFigures{key: k, clicks: c.clicks, unique: c.unique})
	}
	// Not summed here: a conversion's figures add up per row, currency and status downstream.
	var vs []conversionFigures
	for _, c := range convs {
		if k, ok := find(c.key); ok {
			c.key = k
			vs = append(vs, c)
		}
	}
	return cs, vs
}

// Query returns one row per group with traffic or conversions in range; grouped by day or
// hour, every day or hour of the range has a row, zeros included. Rows by day and hour run in
// time order, the others by clicks, then commission, descending.
func (s *Service) Query(ctx context.Context, scope Scope, p Params) ([]Row, error) {
	pl, err := s.plan(scope, p)
	if err != nil {
		return nil, err
	}
	p, g := pl.p, pl.g
	clicks, convs, err := s.figures(ctx, pl)
	if err != nil {
		return nil, err
	}
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
	if p.GroupBy == Day || p.GroupBy == Hour {
		for _, b := range p.buckets() {
			get(b.key, "", "")
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

// figures reads a plan's clicks and conversions, concurrently, keyed by the plan's groups.
func (s *Service) figures(ctx context.Context, pl plan) ([]clickFigures, []conversionFigures, error) {
	var clicks []clickFigures
	var convs []conversionFigures
	var clickErr, convErr error
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); clicks, clickErr = s.clicks(ctx, pl.g, pl.clicks) }()
	go func() { defer wg.Done(); convs, convErr = s.conversions(ctx, pl.g, pl.convs) }()
	wg.Wait()
	if err := errors.Join(clickErr, convErr); err != nil {
		return nil, nil, err
	}
	if pl.quarters {
		clicks, convs = pl.bucketed(clicks, convs)
	} else if pl.p.GroupBy == Day {
		// Whatever is stored, a range yields only its own days: the condition compares days in
		// ClickHouse, where a time outside DateTime's range has wrapped onto another one.
		clicks = slices.DeleteFunc(clicks, func(c clickFigures) bool { return !pl.p.hasDay(c.key) })
		convs = slices.DeleteFunc(convs, func(c conversionFigures) bool { return !pl.p.hasDay(c.key) })
	}
	return clicks, convs, nil
}

func sortRows(rows []Row, g GroupBy) {
	if g == Day || g == Hour {
		slices.SortFunc(rows, func(a, b Row) int { return cmp.Or(a.Day.Compare(b.Day), a.Hour.Compare(b.Hour)) })
		return
	}
	key := func(r Row) string {
		return strings.Join([]string{r.ProgramID, r.AffiliateID, r.LinkID, r.Sub1, r.Attribution, r.Country, r.Region, r.City,
			strconv.FormatUint(uint64(r.ASN), 10), r.ASOrg, r.Device, r.Browser, r.OS, r.Referrer, r.UTMSource, r.UTMCampaign}, "\x00")
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

func (s *Service) clicks(ctx context.Context, g grouping, src source) ([]clickFigures, error) {
	if g.clicksTable == "" {
		return nil, nil
	}
	q := "SELECT " + g.key + ", " + g.extra + ", sum(clicks), sum(unique_clicks) FROM " + src.from + " GROUP BY " + g.column
	rows, err := s.conn.Query(ctx, q, src.args...)
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

func (s *Service) conversions(ctx context.Context, g grouping, src source) ([]conversionFigures, error) {
	// The amounts are Decimal(38, 0) (migration 0005): read as text, as no Go integer holds them.
	q := "SELECT " + g.key + ", " + g.extra + ", currency, status, sum(conversions), toString(sum(sale_amount)), toString(sum(commission)) FROM " +
		src.from + " GROUP BY " + g.column + ", currency, status"
	rows, err := s.conn.Query(ctx, q, src.args...)
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
