package fraudreview

import (
	"cmp"
	"context"
	"fmt"
	"slices"
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
	AffiliateID     string
	Flagged, Held   Tally
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
	scope := `advertiser_id = ? AND occurred_at >= toDateTime(?) AND occurred_at < toDateTime(?)` + program
	// The latest state of each conversion (the table collapses versions only when it merges),
	// with its click's time from click_index, whose key is the click id: the IN reads only the
	// granules of the period's clicks.
	q := `SELECT conversion_id, affiliate_id, currency, amount, commission, occurred_at, k.clicked_at, k.found
		FROM (
			SELECT conversion_id, argMax(affiliate_id, vr) AS affiliate_id, argMax(currency, vr) AS currency,
				argMax(amount, vr) AS amount, argMax(commission, vr) AS commission, argMax(occurred_at, vr) AS occurred_at,
				argMax(click_id, vr) AS click_id
			FROM (SELECT *, version * 4294967296 + revision AS vr FROM ` + b.Database + `.conversions WHERE ` + scope + `)
			GROUP BY conversion_id
		) ANY LEFT JOIN (
			SELECT click_id, any(occurred_at) AS clicked_at, toUInt8(1) AS found FROM ` + b.Database + `.click_index
			WHERE click_id IN (SELECT click_id FROM ` + b.Database + `.conversions WHERE ` + scope + ` AND click_id != '')
			GROUP BY click_id
		) k USING click_id`
	rows, err := b.Conn.Query(ctx, q, append(args, args...)...)
	if err != nil {
		return BacktestResult{}, fmt.Errorf("backtest: read conversions: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, affiliate, currency string
		var amount, commission int64
		var occurred, clicked time.Time
		var found uint8
		if err := rows.Scan(&id, &affiliate, &currency, &amount, &commission, &occurred, &clicked, &found); err != nil {
			return BacktestResult{}, fmt.Errorf("backtest: read conversions: %w", err)
		}
		facts := fraud.Facts{OccurredAt: occurred.UTC()}
		if found == 1 {
			facts.ClickedAt = clicked.UTC()
		}
		findings := fraud.Decide(req.Settings, skip, facts, at)
		res.Evaluated.add(currency, amount, commission)
		acting := false
		for _, f := range findings {
			byCode[f.Code].add(currency, amount, commission)
			acting = acting || !f.Shadow
		}
		switch {
		case fraud.Holds(findings):
			res.Held.add(currency, amount, commission)
			partner(partners, affiliate).Held.add(currency, amount, commission)
		case acting:
			res.Flagged.add(currency, amount, commission)
			partner(partners, affiliate).Flagged.add(currency, amount, commission)
		case len(findings) > 0:
			res.Shadow.add(currency, amount, commission)
		}
		if acting {
			p := partners[affiliate]
			p.CaughtCommission = p.CaughtCommission.Add(money.SumOf(commission))
		}
	}
	if err := rows.Err(); err != nil {
		return BacktestResult{}, fmt.Errorf("backtest: read conversions: %w", err)
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
