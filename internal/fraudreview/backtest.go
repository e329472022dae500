package fraudreview

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/ext"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/partnerstream/partnerstream/internal/fraud"
	"github.com/partnerstream/partnerstream/internal/money"
)

// MaxBacktestDays bounds a backtest's period.
const MaxBacktestDays = 92

// TopPartners is how many partners a backtest names.
const TopPartners = 10

// Unevaluated are the rules a backtest cannot decide from ClickHouse, with why: it keeps no
// customer e-mail (not even its hash) and no customer id (docs/fraud.md, "Backtests").
var Unevaluated = map[string]string{
	fraud.SelfReferral:      "needs the customer's e-mail, which is compared at registration and never stored",
	fraud.DisposableEmail:   "needs the customer's e-mail domain, which is never stored",
	fraud.DuplicateCustomer: "needs the customer's id or e-mail hash, which only Postgres keeps",
	fraud.DuplicateOrder:    "needs every earlier order id of the advertiser, which only Postgres indexes",
}

// BacktestRequest is a rule set and the period it runs over: conversions that occurred in
// [From, To), of one program or (ProgramID empty) every program of the advertiser.
type BacktestRequest struct {
	Settings  fraud.Settings
	ProgramID string
	From, To  time.Time
	// Exemptions are the reason codes switched off per partnership (fraud.Service.Exemptions),
	// applied as registration applies them.
	Exemptions map[fraud.Partnership][]string
}

// Amount is a sum of sale amounts and commissions in one currency.
type Amount struct {
	Currency         string
	Sale, Commission money.Sum
}

// Tally counts conversions and sums their amounts per currency.
type Tally struct {
	Conversions int64
	Amounts     []Amount // by currency, sorted
}

func (t *Tally) add(currency string, sale, commission int64) {
	t.Conversions++
	i, found := slices.BinarySearchFunc(t.Amounts, currency, func(a Amount, c string) int { return cmp.Compare(a.Currency, c) })
	if !found {
		t.Amounts = slices.Insert(t.Amounts, i, Amount{Currency: currency})
	}
	a := &t.Amounts[i]
	a.Sale, a.Commission = a.Sale.Add(money.SumOf(sale)), a.Commission.Add(money.SumOf(commission))
}

// RuleResult is what one rule of the set would have done.
type RuleResult struct {
	Code    string
	Action  string
	Shadow  bool
	Enabled bool
	// Evaluated is false for a rule a backtest cannot decide (Unevaluated gives why).
	Evaluated bool
	Reason    string
	Fired     Tally
}

// PartnerResult is one affiliate's conversions the set would have flagged or held.
type PartnerResult struct {
	AffiliateID      string
	Flagged, Held    Tally
	CaughtCommission money.Sum // for ordering: held and flagged commissions, every currency
}

// BacktestResult is what a rule set would have done over a period. A conversion is held
// when an acting rule that fired holds, flagged when acting rules fired and none holds;
// shadow rules never act, and count only in their rule's result and in Shadow.
type BacktestResult struct {
	From, To  time.Time
	Evaluated Tally // every conversion of the period
	Flagged   Tally
	Held      Tally
	// Shadow: conversions on which only shadow rules fired.
	Shadow      Tally
	Rules       []RuleResult
	TopPartners []PartnerResult
}

// Backtest runs rule sets over the conversions ClickHouse keeps.
type Backtest struct {
	Conn     driver.Conn
	Database string
	Now      func() time.Time
}

// Run evaluates req's rules, with the fraud package's own decision, over the advertiser's
// conversions of the period.
func (b Backtest) Run(ctx context.Context, advertiserID string, req BacktestRequest) (BacktestResult, error) {
	now := time.Now
	if b.Now != nil {
		now = b.Now
	}
	at := now().UTC()
	// The rules the backtest cannot decide are switched off for it, as a partnership's
	// exemptions switch rules off: Decide then skips them.
	var skip []string
	for code := range Unevaluated {
		skip = append(skip, code)
	}
	res := BacktestResult{From: req.From, To: req.To}
	byCode := map[string]*Tally{}
	for _, r := range fraud.Catalogue {
		s := req.Settings[r.Code]
		rr := RuleResult{Code: r.Code, Action: s.Action, Shadow: s.Shadow, Enabled: s.Enabled, Evaluated: true}
		if why, ok := Unevaluated[r.Code]; ok {
			rr.Evaluated, rr.Reason = false, why
		}
		res.Rules = append(res.Rules, rr)
	}
	for i := range res.Rules {
		byCode[res.Rules[i].Code] = &res.Rules[i].Fired
	}
	partners := map[string]*PartnerResult{}

	program, args := "", []any{advertiserID, req.From.Unix(), req.To.Unix()}
	if req.ProgramID != "" {
		program = " AND program_id = ?"
		args = append(args, req.ProgramID)
	}
	src := source{db: b.Database, scope: `advertiser_id = ? AND occurred_at >= toDateTime(?) AND occurred_at < toDateTime(?)` + program, args: args}
	list, err := b.conversions(ctx, src)
	if err != nil {
		return BacktestResult{}, err
	}
	if err := b.clickTimes(ctx, src, list); err != nil {
		return BacktestResult{}, err
	}
	// Read for the rules that run for some partnership (as for all of them, before their
	// exemptions).
	var clicks map[string]fraud.Click
	if fraud.ClickRulesActive(req.Settings, skip) {
		var window time.Duration
		if req.Settings.Active(fraud.ClickVelocity, skip) {
			window = time.Duration(req.Settings[fraud.ClickVelocity].Seconds["window_seconds"]) * time.Second
		}
		if clicks, err = b.clicks(ctx, src, list, fraud.ClickColumns(req.Settings, skip), window); err != nil {
			return BacktestResult{}, err
		}
	}
	// Per partnership: the rules skipped for all, and its exemptions.
	exempt := map[fraud.Partnership][]string{}
	for p, codes := range req.Exemptions {
		exempt[p] = append(slices.Clone(skip), codes...)
	}
	for _, c := range list {
		off, ok := exempt[fraud.Partnership{ProgramID: c.program, AffiliateID: c.affiliate}]
		if !ok {
			off = skip
		}
		facts := fraud.Facts{OccurredAt: c.occurred, ClickedAt: c.clicked}
		findings := fraud.Decide(req.Settings, off, facts, at)
		if k, ok := clicks[c.clickID]; ok {
			findings = append(findings, fraud.DecideClick(req.Settings, off, k, fraud.Conversion{ProgramID: c.program,
				AffiliateID: c.affiliate, Type: c.kind, Amount: c.amount, Currency: c.currency, OccurredAt: c.occurred}, at)...)
		}
		res.Evaluated.add(c.currency, c.amount, c.commission)
		acting := false
		for _, f := range findings {
			byCode[f.Code].add(c.currency, c.amount, c.commission)
			acting = acting || !f.Shadow
		}
		switch {
		case fraud.Holds(findings):
			res.Held.add(c.currency, c.amount, c.commission)
			partner(partners, c.affiliate).Held.add(c.currency, c.amount, c.commission)
		case acting:
			res.Flagged.add(c.currency, c.amount, c.commission)
			partner(partners, c.affiliate).Flagged.add(c.currency, c.amount, c.commission)
		case len(findings) > 0:
			res.Shadow.add(c.currency, c.amount, c.commission)
		}
		if acting {
			p := partners[c.affiliate]
			p.CaughtCommission = p.CaughtCommission.Add(money.SumOf(c.commission))
		}
	}
	for _, p := range partners {
		res.TopPartners = append(res.TopPartners, *p)
	}
	slices.SortFunc(res.TopPartners, func(a, b PartnerResult) int {
		return cmp.Or(cmp.Compare(b.Held.Conversions+b.Flagged.Conversions, a.Held.Conversions+a.Flagged.Conversions),
			b.CaughtCommission.Cmp(a.CaughtCommission), cmp.Compare(a.AffiliateID, b.AffiliateID))
	})
	if len(res.TopPartners) > TopPartners {
		res.TopPartners = res.TopPartners[:TopPartners]
	}
	return res, nil
}

func partner(m map[string]*PartnerResult, id string) *PartnerResult {
	p, ok := m[id]
	if !ok {
		p = &PartnerResult{AffiliateID: id}
		m[id] = p
	}
	return p
}

// source is the conversions a backtest reads: a condition on ClickHouse's conversion_changes.
type source struct {
	db, scope string
	args      []any
}

// changes are the source's stored states of conversions (a new version or revision adds a
// row). conversion_changes rather than conversions: its sorting key leads with the
// advertiser and it is partitioned by month, so the read is the advertiser's period alone,
// where conversions (sorted by conversion id) is read whole.
func (s source) changes() string {
	return s.db + `.conversion_changes WHERE sign > 0 AND ` + s.scope
}

// clickIDs is a subquery of the click ids of the source's conversions.
func (s source) clickIDs() string {
	return `SELECT click_id FROM ` + s.changes() + ` AND click_id != ''`
}

// stored is a conversion as ClickHouse keeps it, with its click's time.
type stored struct {
	affiliate, program, kind, currency string
	amount, commission                 int64
	occurred                           time.Time
	clickID                            string
	clicked                            time.Time // zero: no click, or not in ClickHouse
}

// conversions reads the latest state of each conversion: its highest version and revision
// (merges collapse the states only eventually).
func (b Backtest) conversions(ctx context.Context, src source) ([]stored, error) {
	rows, err := b.Conn.Query(ctx, `SELECT argMax(affiliate_id, vr), argMax(program_id, vr), argMax(type, vr), argMax(currency, vr),
			argMax(amount, vr), argMax(commission, vr), argMax(occurred_at, vr), argMax(click_id, vr)
		FROM (SELECT conversion_id, affiliate_id, program_id, type, currency, amount, commission, occurred_at, click_id,
			version * 4294967296 + revision AS vr FROM `+src.changes()+`)
		GROUP BY conversion_id`, src.args...)
	if err != nil {
		return nil, fmt.Errorf("backtest: read conversions: %w", err)
	}
	defer rows.Close()
	var out []stored
	for rows.Next() {
		var c stored
		if err := rows.Scan(&c.affiliate, &c.program, &c.kind, &c.currency, &c.amount, &c.commission, &c.occurred, &c.clickID); err != nil {
			return nil, fmt.Errorf("backtest: read conversions: %w", err)
		}
		c.occurred = c.occurred.UTC()
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("backtest: read conversions: %w", err)
	}
	return out, nil
}

// clickTimes sets the time of each conversion's click from click_index, whose key is the
// click id, joined in Go (a map by click id). When more than one click in 8,192 converts
// (a granule), the IN skips few granules and reads click_index nearly whole (docs/fraud.md,
// "Backtests").
func (b Backtest) clickTimes(ctx context.Context, src source, list []stored) error {
	rows, err := b.Conn.Query(ctx, `SELECT click_id, occurred_at FROM `+src.db+`.click_index WHERE click_id IN (`+src.clickIDs()+`)`,
		src.args...)
	if err != nil {
		return fmt.Errorf("backtest: read click times: %w", err)
	}
	defer rows.Close()
	// Copies of a click (ingest writes at least once) say the same.
	at := make(map[string]time.Time, len(list))
	for rows.Next() {
		var id string
		var t time.Time
		if err := rows.Scan(&id, &t); err != nil {
			return fmt.Errorf("backtest: read click times: %w", err)
		}
		at[id] = t.UTC()
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("backtest: read click times: %w", err)
	}
	for i := range list {
		if t, ok := at[list[i].clickID]; ok && list[i].clickID != "" {
			list[i].clicked = t
		}
	}
	return nil
}

// clickFacts are the columns of clicks a backtest scans into fraud.Click, in order, each
// with the empty value that stands in for it when no active rule reads it (a rule reads an
// empty fact as unknown, and does not fire on it).
var clickFacts = []struct{ column, empty string }{
	{"link_id", "''"}, {"country", "''"}, {"asn", "toUInt32(0)"}, {"hosting", "toUInt8(0)"}, {"device_type", "''"},
	{"browser", "''"}, {"os", "''"}, {"referrer_domain", "''"}, {"utm_source", "''"}, {"utm_medium", "''"},
	{"utm_campaign", "''"}, {"paid_ads", "''"}, {"ip", "''"}, {"visitor", "''"},
}

// clicks reads the click-stage facts of the conversions' clicks from ClickHouse's clicks,
// the columns the active rules read (read), within the span of their times (the sorting
// key's day narrows the read to it); with a velocity window, it also counts each click's
// RecentClicks from the clicks of the same link and address or visitor.
func (b Backtest) clicks(ctx context.Context, src source, list []stored, read func(column string) bool, window time.Duration) (map[string]fraud.Click, error) {
	var first, last time.Time
	for _, c := range list {
		if c.clicked.IsZero() {
			continue
		}
		if first.IsZero() || c.clicked.Before(first) {
			first = c.clicked
		}
		if c.clicked.After(last) {
			last = c.clicked
		}
	}
	if first.IsZero() {
		return nil, nil
	}
	out := make(map[string]fraud.Click, len(list))
	columns := make([]string, len(clickFacts))
	for i, f := range clickFacts {
		columns[i] = f.empty
		if read(f.column) {
			columns[i] = f.column
		}
	}
	span := `advertiser_id = ? AND toDate(occurred_at) >= toDate(toDateTime(?)) AND occurred_at >= toDateTime(?) AND occurred_at <= toDateTime(?)`
	spanArgs := func(from time.Time) []any { return []any{src.args[0], from.Unix(), from.Unix(), last.Unix()} }
	rows, err := b.Conn.Query(ctx, `SELECT click_id, occurred_at, `+strings.Join(columns, ", ")+` FROM `+src.db+`.clicks
		WHERE `+span+` AND click_id IN (`+src.clickIDs()+`)`, append(spanArgs(first), src.args...)...)
	if err != nil {
		return nil, fmt.Errorf("backtest: read clicks: %w", err)
	}
	defer rows.Close()
	whose := make(map[string]who, len(list))
	for rows.Next() {
		var k fraud.Click
		var hosting uint8
		var paid string
		var w who
		if err := rows.Scan(&k.ID, &k.At, &k.LinkID, &k.Country, &k.ASN, &hosting, &k.DeviceType, &k.Browser, &k.OS, &k.ReferrerDomain,
			&k.UTMSource, &k.UTMMedium, &k.UTMCampaign, &paid, &w.ip, &w.visitor); err != nil {
			return nil, fmt.Errorf("backtest: read clicks: %w", err)
		}
		k.At, k.Hosting = k.At.UTC(), hosting == 1
		if paid != "" {
			k.PaidAds = strings.Split(paid, ",")
		}
		// Copies of a click (ingest writes at least once) say the same.
		out[k.ID], whose[k.ID] = k, w
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("backtest: read clicks: %w", err)
	}
	if window <= 0 {
		return out, nil
	}
	byLink, err := b.visits(ctx, src.db, span, spanArgs(first.Add(-window)), out, whose)
	if err != nil {
		return nil, err
	}
	// Counted as registration counts them, from the visits of the click's link in the window
	// up to it: a search in the link's visits by time, so that a link with many converting
	// clicks costs each of them its window's visits, not the link's month.
	for id, k := range out {
		visits := byLink[k.LinkID]
		start := k.At.Add(-window)
		lo := sort.Search(len(visits), func(i int) bool { return !visits[i].At.Before(start) })
		hi := sort.Search(len(visits), func(i int) bool { return visits[i].At.After(k.At) })
		w := whose[id]
		k.RecentClicks = fraud.RecentClicks(k, w.ip, w.visitor, window, visits[lo:hi])
		out[id] = k
	}
	return out, nil
}

// who is the address and the visitor a click came from.
type who struct{ ip, visitor string }

// visits reads the clicks of the converting clicks' links from their addresses or visitors,
// in the span widened by the window (usually a few per converting click), by link in time
// order. The (link, address) and (link, visitor) pairs go with the query as external
// tables: as subqueries, each would scan the span's clicks again.
func (b Backtest) visits(ctx context.Context, db, span string, args []any, converting map[string]fraud.Click,
	whose map[string]who) (map[string][]fraud.Visit, error) {
	byIP, err := ext.NewTable("_by_ip", ext.Column("link_id", "String"), ext.Column("ip", "String"))
	if err != nil {
		return nil, fmt.Errorf("backtest: count click velocity: %w", err)
	}
	byVisitor, err := ext.NewTable("_by_visitor", ext.Column("link_id", "String"), ext.Column("visitor", "String"))
	if err != nil {
		return nil, fmt.Errorf("backtest: count click velocity: %w", err)
	}
	var ips, visitors int
	for id, k := range converting {
		w := whose[id]
		if w.ip != "" {
			if err := byIP.Append(k.LinkID, w.ip); err != nil {
				return nil, fmt.Errorf("backtest: count click velocity: %w", err)
			}
			ips++
		}
		if w.visitor != "" {
			if err := byVisitor.Append(k.LinkID, w.visitor); err != nil {
				return nil, fmt.Errorf("backtest: count click velocity: %w", err)
			}
			visitors++
		}
	}
	var match []string
	if ips > 0 {
		match = append(match, "(link_id, ip) IN _by_ip")
	}
	if visitors > 0 {
		match = append(match, "(link_id, visitor) IN _by_visitor")
	}
	if match == nil {
		return nil, nil
	}
	rows, err := b.Conn.Query(clickhouse.Context(ctx, clickhouse.WithExternalTable(byIP, byVisitor)),
		`SELECT click_id, link_id, ip, visitor, occurred_at FROM `+db+`.clicks WHERE `+span+` AND (`+strings.Join(match, " OR ")+`)`, args...)
	if err != nil {
		return nil, fmt.Errorf("backtest: count click velocity: %w", err)
	}
	defer rows.Close()
	seen := make(map[string]bool, len(converting))
	byLink := map[string][]fraud.Visit{}
	for rows.Next() {
		var id string
		var x fraud.Visit
		if err := rows.Scan(&id, &x.Link, &x.IP, &x.Visitor, &x.At); err != nil {
			return nil, fmt.Errorf("backtest: count click velocity: %w", err)
		}
		// A click stored twice counts once.
		if seen[id] {
			continue
		}
		seen[id] = true
		byLink[x.Link] = append(byLink[x.Link], x)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("backtest: count click velocity: %w", err)
	}
	for _, v := range byLink {
		slices.SortFunc(v, func(a, b fraud.Visit) int { return a.At.Compare(b.At) })
	}
	return byLink, nil
}
