package fraudreview

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

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
	var clicks map[string]fraud.Click
	if fraud.ClickRulesActive(req.Settings, skip) {
		var window time.Duration
		if req.Settings.Active(fraud.ClickVelocity, skip) {
			window = time.Duration(req.Settings[fraud.ClickVelocity].Seconds["window_seconds"]) * time.Second
		}
		if clicks, err = b.clicks(ctx, src, list, window); err != nil {
			return BacktestResult{}, err
		}
	}
	for _, c := range list {
		facts := fraud.Facts{OccurredAt: c.occurred, ClickedAt: c.clicked}
		findings := fraud.Decide(req.Settings, skip, facts, at)
		if k, ok := clicks[c.clickID]; ok {
			findings = append(findings, fraud.DecideClick(req.Settings, skip, k, fraud.Conversion{ProgramID: c.program,
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

// source is the conversions a backtest reads: a condition on ClickHouse's conversions.
type source struct {
	db, scope string
	args      []any
}

// clickIDs is a subquery of the click ids of the source's conversions.
func (s source) clickIDs() string {
	return `SELECT click_id FROM ` + s.db + `.conversions WHERE ` + s.scope + ` AND click_id != ''`
}

// stored is a conversion as ClickHouse keeps it, with its click's time.
type stored struct {
	id, affiliate, program, kind, currency string
	amount, commission                     int64
	occurred                               time.Time
	clickID                                string
	clicked                                time.Time // zero: no click, or not in ClickHouse
}

// conversions reads the latest state of each conversion (the table collapses versions only
// when it merges), with its click's time from click_index, whose key is the click id: the
// IN reads only the granules of the period's clicks.
func (b Backtest) conversions(ctx context.Context, src source) ([]stored, error) {
	q := `SELECT conversion_id, affiliate_id, program_id, type, currency, amount, commission, occurred_at, click_id, k.clicked_at, k.found
		FROM (
			SELECT conversion_id, argMax(affiliate_id, vr) AS affiliate_id, argMax(program_id, vr) AS program_id, argMax(type, vr) AS type,
				argMax(currency, vr) AS currency, argMax(amount, vr) AS amount, argMax(commission, vr) AS commission,
				argMax(occurred_at, vr) AS occurred_at, argMax(click_id, vr) AS click_id
			FROM (SELECT conversion_id, affiliate_id, program_id, type, currency, amount, commission, occurred_at, click_id,
				version * 4294967296 + revision AS vr FROM ` + src.db + `.conversions WHERE ` + src.scope + `)
			GROUP BY conversion_id
		) ANY LEFT JOIN (
			SELECT click_id, any(occurred_at) AS clicked_at, toUInt8(1) AS found FROM ` + src.db + `.click_index
			WHERE click_id IN (` + src.clickIDs() + `)
			GROUP BY click_id
		) k USING click_id`
	rows, err := b.Conn.Query(ctx, q, append(slices.Clone(src.args), src.args...)...)
	if err != nil {
		return nil, fmt.Errorf("backtest: read conversions: %w", err)
	}
	defer rows.Close()
	var out []stored
	for rows.Next() {
		var c stored
		var clicked time.Time
		var found uint8
		if err := rows.Scan(&c.id, &c.affiliate, &c.program, &c.kind, &c.currency, &c.amount, &c.commission, &c.occurred, &c.clickID,
			&clicked, &found); err != nil {
			return nil, fmt.Errorf("backtest: read conversions: %w", err)
		}
		c.occurred = c.occurred.UTC()
		if found == 1 {
			c.clicked = clicked.UTC()
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("backtest: read conversions: %w", err)
	}
	return out, nil
}

// clicks reads the click-stage facts of the conversions' clicks from ClickHouse's clicks,
// within the span of their times (the sorting key's day narrows the read to it); with a
// velocity window, it also counts each click's RecentClicks from the clicks of the same link
// and address or visitor.
func (b Backtest) clicks(ctx context.Context, src source, list []stored, window time.Duration) (map[string]fraud.Click, error) {
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
	out := map[string]fraud.Click{}
	if first.IsZero() {
		return out, nil
	}
	span := `advertiser_id = ? AND toDate(occurred_at) >= toDate(toDateTime(?)) AND occurred_at >= toDateTime(?) AND occurred_at <= toDateTime(?)`
	spanArgs := func(from time.Time) []any { return []any{src.args[0], from.Unix(), from.Unix(), last.Unix()} }
	args := append(spanArgs(first), src.args...)
	rows, err := b.Conn.Query(ctx, `SELECT click_id, any(link_id), any(occurred_at), any(country), any(asn), any(hosting), any(device_type),
		any(browser), any(os), any(referrer_domain), any(utm_source), any(utm_medium), any(utm_campaign), any(paid_ads), any(ip), any(visitor)
		FROM `+src.db+`.clicks WHERE `+span+` AND click_id IN (`+src.clickIDs()+`) GROUP BY click_id`, args...)
	if err != nil {
		return nil, fmt.Errorf("backtest: read clicks: %w", err)
	}
	defer rows.Close()
	type who struct{ ip, visitor string }
	whose := map[string]who{}
	for rows.Next() {
		var k fraud.Click
		var hosting uint8
		var paid string
		var w who
		if err := rows.Scan(&k.ID, &k.LinkID, &k.At, &k.Country, &k.ASN, &hosting, &k.DeviceType, &k.Browser, &k.OS, &k.ReferrerDomain,
			&k.UTMSource, &k.UTMMedium, &k.UTMCampaign, &paid, &w.ip, &w.visitor); err != nil {
			return nil, fmt.Errorf("backtest: read clicks: %w", err)
		}
		k.At, k.Hosting = k.At.UTC(), hosting == 1
		if paid != "" {
			k.PaidAds = strings.Split(paid, ",")
		}
		out[k.ID], whose[k.ID] = k, w
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("backtest: read clicks: %w", err)
	}
	if window <= 0 {
		return out, nil
	}
	// The clicks of the converting clicks' links from their addresses or visitors, in the
	// span widened by the window: usually a few per converting click.
	converting := `SELECT %s FROM ` + src.db + `.clicks WHERE ` + span + ` AND %s != '' AND click_id IN (` + src.clickIDs() + `)`
	args = spanArgs(first.Add(-window))
	for range 2 {
		args = append(append(args, spanArgs(first)...), src.args...)
	}
	vrows, err := b.Conn.Query(ctx, `SELECT click_id, any(link_id), any(ip), any(visitor), any(occurred_at) FROM `+src.db+`.clicks
		WHERE `+span+` AND ((link_id, ip) IN (`+fmt.Sprintf(converting, "link_id, ip", "ip")+`)
			OR (link_id, visitor) IN (`+fmt.Sprintf(converting, "link_id, visitor", "visitor")+`))
		GROUP BY click_id`, args...)
	if err != nil {
		return nil, fmt.Errorf("backtest: count click velocity: %w", err)
	}
	defer vrows.Close()
	byLink := map[string][]fraud.Visit{}
	for vrows.Next() {
		var id string
		var x fraud.Visit
		if err := vrows.Scan(&id, &x.Link, &x.IP, &x.Visitor, &x.At); err != nil {
			return nil, fmt.Errorf("backtest: count click velocity: %w", err)
		}
		byLink[x.Link] = append(byLink[x.Link], x)
	}
	if err := vrows.Err(); err != nil {
		return nil, fmt.Errorf("backtest: count click velocity: %w", err)
	}
	// Counted as registration counts them.
	for id, k := range out {
		w := whose[id]
		k.RecentClicks = fraud.RecentClicks(k, w.ip, w.visitor, window, byLink[k.LinkID])
		out[id] = k
	}
	return out, nil
}
