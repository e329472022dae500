package stats

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// The groupings by where clicks come from (docs/tracking.md, "Where clicks come from"). A
// conversion counts under its click's (ingest copies them, ClickHouse migration 0011); a
// value ingest could not tell is "".
const (
	Country     GroupBy = "country"
	Region      GroupBy = "region" // within its country
	City        GroupBy = "city"   // within its country and region
	ASN         GroupBy = "asn"    // with its organisation
	Device      GroupBy = "device"
	Browser     GroupBy = "browser"
	OS          GroupBy = "os"
	Referrer    GroupBy = "referrer"
	UTMSource   GroupBy = "utm_source"
	UTMCampaign GroupBy = "utm_campaign"
)

// OriginGroupings are the groupings by where clicks come from, in the order the API
// documents them.
var OriginGroupings = []GroupBy{Country, Region, City, ASN, Device, Browser, OS, Referrer, UTMSource, UTMCampaign}

// Filters are the parameters that narrow a report to clicks (and their conversions) of one
// origin, in the order the API documents them.
var Filters = []string{"country", "device", "browser", "os", "asn", "referrer", "utm_source", "utm_campaign", "hosting"}

// filterColumns are the ClickHouse columns of the filters, in clicks and conversion_changes
// alike.
var filterColumns = map[string]string{
	"country": "country", "device": "device_type", "browser": "browser", "os": "os", "asn": "asn",
	"referrer": "referrer_domain", "utm_source": "utm_source", "utm_campaign": "utm_campaign", "hosting": "hosting",
}

// Devices are the device types a click can have (internal/enrich).
var Devices = []string{"desktop", "mobile", "tablet", "bot", "other"}

// maxFilterLength bounds a free-text filter value: the longest value ingest stores (UTM
// values are cut to 256 characters, internal/enrich).
const maxFilterLength = 256

// filter is a validated filter: its column and the value to compare it with.
type filter struct {
	column string
	value  any
}

// resolveFilters validates p.Where, naming the parameter of a bad value.
func resolveFilters(where map[string]string) ([]filter, error) {
	var out []filter
	for _, name := range Filters {
		v, ok := where[name]
		if !ok {
			continue
		}
		f := filter{column: filterColumns[name], value: v}
		switch name {
		case "country":
			if len(v) != 2 || strings.ToUpper(v) != v || !isLetters(v) {
				return nil, &ParamError{name, fmt.Sprintf("must be an ISO 3166-1 alpha-2 country code such as DE, in capitals; %q is not", v)}
			}
		case "device":
			if !slices.Contains(Devices, v) {
				return nil, &ParamError{name, fmt.Sprintf("must be one of %s; %q is not", strings.Join(Devices, ", "), v)}
			}
		case "asn":
			n, err := strconv.ParseUint(v, 10, 32)
			if err != nil || n == 0 {
				return nil, &ParamError{name, fmt.Sprintf("must be an autonomous system number from 1 to 4294967295, such as 3320; %q is not", v)}
			}
			f.value = uint32(n)
		case "hosting":
			b, err := strconv.ParseBool(v)
			if err != nil || v != "true" && v != "false" {
				return nil, &ParamError{name, fmt.Sprintf("must be true or false; %q is not", v)}
			}
			f.value = uint8(0)
			if b {
				f.value = uint8(1)
			}
		default:
			if v == "" || utf8.RuneCountInString(v) > maxFilterLength || !utf8.ValidString(v) || strings.ContainsFunc(v, unicode.IsControl) {
				return nil, &ParamError{name, fmt.Sprintf("must be 1 to %d characters of text without control characters", maxFilterLength)}
			}
		}
		out = append(out, f)
	}
	for name := range where {
		if _, ok := filterColumns[name]; !ok {
			return nil, &ParamError{name, "is not a filter: use one of " + strings.Join(Filters, ", ")}
		}
	}
	return out, nil
}

func isLetters(s string) bool {
	for _, r := range s {
		if r < 'A' || r > 'Z' {
			return false
		}
	}
	return true
}

// keySep joins the parts of a grouping's key that has several (a city's country and region):
// no stored value holds a tab (ingest's databases and parsers yield none, and UTM values are
// cleaned of control characters).
const keySep = "\t"

// splitKey is a key's parts, n of them (missing ones empty).
func splitKey(key string, n int) []string {
	parts := strings.SplitN(key, keySep, n)
	for len(parts) < n {
		parts = append(parts, "")
	}
	return parts
}

// dimension says how a grouping by where clicks come from reads: the raw columns it groups
// by, its key as one String, and how the key sets a row.
func dimension(columns []string, set func(r *Row, parts []string)) grouping {
	// As a String whatever the column's type (country is LowCardinality), as the rollups by
	// origin hold it (migration 0012), so the raw rows of a range's edges add up with them.
	var parts []string
	for _, c := range columns {
		parts = append(parts, "CAST("+c+" AS String)")
	}
	key := parts[0]
	if len(parts) > 1 {
		key = "concat(" + strings.Join(parts, ", '\\t', ") + ")"
	}
	cols := strings.Join(columns, ", ")
	return grouping{clicksTable: rawClicks, convsTable: rawConversions, column: cols, key: key, extra: noExtra,
		set: func(r *Row, key, _, _ string) { set(r, splitKey(key, len(columns))) }}
}

var dimensionGroupings = map[GroupBy]grouping{
	Country: dimension([]string{"country"}, func(r *Row, k []string) { r.Country = k[0] }),
	Region:  dimension([]string{"country", "region"}, func(r *Row, k []string) { r.Country, r.Region = k[0], k[1] }),
	City: dimension([]string{"country", "region", "city"}, func(r *Row, k []string) {
		r.Country, r.Region, r.City = k[0], k[1], k[2]
	}),
	ASN: dimension([]string{"asn", "as_org"}, func(r *Row, k []string) {
		n, _ := strconv.ParseUint(k[0], 10, 32)
		r.ASN, r.ASOrg = uint32(n), k[1]
	}),
	Device:      dimension([]string{"device_type"}, func(r *Row, k []string) { r.Device = k[0] }),
	Browser:     dimension([]string{"browser"}, func(r *Row, k []string) { r.Browser = k[0] }),
	OS:          dimension([]string{"os"}, func(r *Row, k []string) { r.OS = k[0] }),
	Referrer:    dimension([]string{"referrer_domain"}, func(r *Row, k []string) { r.Referrer = k[0] }),
	UTMSource:   dimension([]string{"utm_source"}, func(r *Row, k []string) { r.UTMSource = k[0] }),
	UTMCampaign: dimension([]string{"utm_campaign"}, func(r *Row, k []string) { r.UTMCampaign = k[0] }),
}

// The raw tables, for groupings and filters no rollup holds: the clicks' narrow copy
// (migration 0017: no bots, the columns the reports read, the strings as LowCardinality) and
// the conversion changes.
const (
	rawClicks      = "clicks_narrow"
	rawConversions = "conversion_changes"
)

// rawDay is each raw table's day, as its sorting key has it.
var rawDay = map[string]string{rawClicks: "day", rawConversions: "toDate(occurred_at)"}

// rawColumns are the raw columns (or expressions, aliased as the rollups name them) each of
// the other groupings reads from the raw tables; by day, each table's own day (rawDay).
var rawColumns = map[GroupBy]string{
	Hour:        "toStartOfFifteenMinutes(occurred_at) AS quarter",
	Program:     "program_id",
	Affiliate:   "affiliate_id",
	Link:        "link_id, program_id, affiliate_id",
	Sub1:        "sub1",
	Attribution: "attribution",
}

// rawPlan reads the figures from the narrow clicks and the conversion changes of the range,
// summed exactly as the views sum them into the rollups: what a grouping or filter by where
// clicks come from reads when no rollup holds it. The rows are read by the range's UTC days
// and instants (rawCondition), so every zone is exact; grouped by day in a zone whose days are
// not UTC days, or by hour, by quarter hour as the quarter-hour rollups are (plan.bucketed).
func (s *Service) rawPlan(scope Scope, p Params, g grouping) plan {
	pl := plan{p: p, g: g}
	start, end := p.span()
	if p.GroupBy == Hour || p.GroupBy == Day && !utcAligned(p) {
		pl.g = groupings[Hour]
		if p.GroupBy == Day {
			pl.g.set = groupings[Day].set
		}
		pl.quarters = true
	}
	raw := rawColumns[p.GroupBy]
	switch {
	case pl.quarters:
		raw = rawColumns[Hour]
	case raw == "":
		raw = g.column // by day, or by where clicks come from: the grouping's own columns
	}
	groupCols := raw
	if strings.Contains(raw, " AS ") {
		groupCols = raw[strings.LastIndex(raw, " AS ")+4:]
	}
	from := func(table, sums, group, currency string) source {
		where, args := p.rawCondition(scope, table, [][2]time.Time{{start, end}}, currency)
		selected := raw
		if p.GroupBy == Day && !pl.quarters {
			// The table's own day (rawDay): an alias of another expression named day would hide
			// the narrow clicks' day column from the WHERE, which would then read every day.
			selected = rawDay[table] + " AS day"
		}
		return source{"(SELECT " + selected + ", " + sums + " FROM " + s.db + "." + table + " WHERE " + where + " GROUP BY " + groupCols + group + ")", args}
	}
	if g.clicksTable != "" {
		pl.clicks = from(rawClicks, rawClickSums, "", "")
	}
	pl.convsAll = from(rawConversions, rawConvSums, rawConvGroup, "")
	pl.convs = from(rawConversions, rawConvSums, rawConvGroup, p.Currency)
	return pl
}

// rawCondition narrows a raw table to the company (of a scope plan has checked), the instants
// of spans, the asked program and the filters, and its conversions to currency if one is
// asked. The spans are read by their UTC days, which the raw tables' sorting keys hold
// (ClickHouse 18.16 does not narrow a key on toDate(occurred_at) from a condition on
// occurred_at, and would read the company's whole month), and by their instants unless they
// are whole UTC days.
func (p Params) rawCondition(scope Scope, table string, spans [][2]time.Time, currency string) (string, []any) {
	day := rawDay[table]
	var ors []string
	args := []any{scope.CompanyID}
	for _, s := range spans {
		c := day + " >= toDate(?) AND " + day + " <= toDate(?)"
		args = append(args, utcDay(s[0]).Format(time.DateOnly), utcDay(s[1].Add(-time.Second)).Format(time.DateOnly))
		if !s[0].Equal(utcDay(s[0])) || !s[1].Equal(utcDay(s[1])) {
			c += " AND occurred_at >= toDateTime(?) AND occurred_at < toDateTime(?)"
			args = append(args, s[0].Unix(), s[1].Unix())
		}
		ors = append(ors, c)
	}
	cond := scopeColumns[scope.Kind] + " = ? AND (" + strings.Join(ors, " OR ") + ")"
	cond, args = p.inProgram(cond, args)
	fcond, fargs := filterCondition(p.filters)
	return inCurrency(cond+fcond, append(args, fargs...), currency)
}

// filterCondition is the filters as conditions to append to a WHERE, with their arguments:
// the raw tables and the small dimensions' rollups name the columns alike.
func filterCondition(filters []filter) (string, []any) {
	var cond string
	var args []any
	for _, f := range filters {
		cond += " AND " + f.column + " = ?"
		args = append(args, f.value)
	}
	return cond, args
}

// utcAligned says whether p's days (and range) start on UTC midnights: then its days are UTC
// days, which the daily rollups hold.
func utcAligned(p Params) bool {
	start, end := p.span()
	if !start.Equal(utcDay(start)) || !end.Equal(utcDay(end)) {
		return false
	}
	if p.GroupBy == Day {
		// London's range of January to December starts and ends on UTC midnights, not its
		// summer days.
		for _, b := range p.buckets() {
			if !b.start.Equal(utcDay(b.start)) {
				return false
			}
		}
	}
	return true
}
