package export

import (
	"strconv"
	"strings"
	"time"

	"github.com/partnerstream/partnerstream/internal/conversions"
	"github.com/partnerstream/partnerstream/internal/money"
	"github.com/partnerstream/partnerstream/internal/stats"
)

// The layouts of the files. Amounts are plain decimals in their currency's minor units
// ("42.50", "1000", "0.125"), the cell beside them names the currency, times are RFC 3339 in
// UTC, and an empty cell is an absent value.

func text(names ...string) []Column {
	out := make([]Column, len(names))
	for i, n := range names {
		out[i] = Column{Name: n}
	}
	return out
}

func number(names ...string) []Column {
	out := text(names...)
	for i := range out {
		out[i].Number = true
	}
	return out
}

func cols(groups ...[]Column) []Column {
	var out []Column
	for _, g := range groups {
		out = append(out, g...)
	}
	return out
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

func stampOf(t *time.Time) string {
	if t == nil {
		return ""
	}
	return stamp(*t)
}

// exchangeColumns are the snapshot of a sale reported in another currency than its
// program's (docs/conversions.md), empty for one in the program currency: the amount as
// reported, its currency, the rate and its day. The converted amount is the row's amount.
var exchangeColumns = cols(number("original_amount"), text("original_currency"), number("exchange_rate"), text("rate_date"))

func exchange(e *conversions.Exchange) []string {
	if e == nil {
		return []string{"", "", "", ""}
	}
	return []string{money.Format(e.OriginalAmount, e.OriginalCurrency), e.OriginalCurrency, e.Rate, e.RateDate.Format(time.DateOnly)}
}

// Conversions is the file of conversions, each with its commission.
var Conversions = Table[conversions.Conversion]{
	Columns: cols(text("id", "occurred_at", "program_id", "affiliate_id", "link_id", "click_id", "sub1", "external_id", "type"),
		number("amount"), text("currency", "commission_id"), number("commission_amount"),
		text("commission_currency", "status", "reason", "payout_id", "source", "created_at", "attribution", "coupon_code",
			"customer_id"), exchangeColumns, text("advertiser_name", "affiliate_name")),
	Record: func(c conversions.Conversion, r []string) {
		m := c.Commission
		row := append([]string{c.ID, stamp(c.OccurredAt), c.ProgramID, c.AffiliateID, c.LinkID, c.ClickID, c.Sub1, c.ExternalID, c.Type,
			money.Format(c.Amount, c.Currency), c.Currency, m.ID, money.Format(m.Amount, m.Currency), m.Currency, m.Status,
			m.Reason, m.PayoutID, c.Source, stamp(c.CreatedAt), c.Attribution, c.CouponCode, c.CustomerID}, exchange(c.Exchange)...)
		copy(r, append(row, c.AdvertiserName, c.AffiliateName))
	},
}

// Commissions is the file of commissions.
var Commissions = Table[conversions.Commission]{
	Columns: cols(text("id", "conversion_id", "occurred_at", "program_id", "advertiser_id", "affiliate_id"), number("amount"),
		text("currency", "status", "reason", "hold_until", "payout_id", "created_at", "updated_at"), exchangeColumns,
		text("advertiser_name", "affiliate_name")),
	Record: func(m conversions.Commission, r []string) {
		row := append([]string{m.ID, m.ConversionID, stamp(m.OccurredAt), m.ProgramID, m.AdvertiserID, m.AffiliateID,
			money.Format(m.Amount, m.Currency), m.Currency, m.Status, m.Reason, stampOf(m.HoldUntil), m.PayoutID,
			stamp(m.CreatedAt), stamp(m.UpdatedAt)}, exchange(m.Exchange)...)
		copy(r, append(row, m.AdvertiserName, m.AffiliateName))
	},
}

// Payouts is the mass-payment file: one row per payment to make (an advertiser, an affiliate
// and a currency). Its first five columns are the common mass-payment layout (payee email,
// amount, currency, a reference of at most 30 characters, the payee's name); the others say
// what the payment covers, and the last two name both companies, as in the other files.
var Payouts = Table[conversions.PayoutTotal]{
	Columns: cols(text("payee_email"), number("amount"), text("currency", "reference", "payee_name", "affiliate_id", "advertiser_id"),
		number("payout_count", "commission_count"), text("period_start", "period_end", "payout_ids", "advertiser_name", "affiliate_name")),
	Record: func(t conversions.PayoutTotal, r []string) {
		ref := ""
		if len(t.PayoutIDs) > 0 {
			ref = t.PayoutIDs[0]
		}
		copy(r, []string{t.PayeeEmail, money.FormatSum(t.Amount, t.Currency), t.Currency, ref, t.PayeeName, t.AffiliateID,
			t.AdvertiserID, strconv.FormatInt(t.Payouts, 10), strconv.FormatInt(t.Commissions, 10), stamp(t.PeriodStart),
			stamp(t.PeriodEnd), strings.Join(t.PayoutIDs, " "), t.AdvertiserName, t.PayeeName})
	},
}

// statsNames are the name columns of each grouping, after the figures: the names of its
// key ids (a day, a sub1 or an attribution has none).
var statsNames = map[stats.GroupBy][]string{
	stats.Program:   {"program_name"},
	stats.Affiliate: {"affiliate_name"},
	stats.Link:      {"program_name", "affiliate_name"},
}

// StatsNamed says whether the file of grouping g has name columns (Stats's names).
func StatsNamed(g stats.GroupBy) bool { return len(statsNames[g]) > 0 }

func statsName(g stats.GroupBy, r stats.Row, n conversions.Names) []string {
	switch g {
	case stats.Program:
		return []string{n.Programs[r.ProgramID]}
	case stats.Affiliate:
		return []string{n.Companies[r.AffiliateID]}
	case stats.Link:
		return []string{n.Programs[r.ProgramID], n.Companies[r.AffiliateID]}
	}
	return nil
}

// statsKeys are the key columns of each grouping.
var statsKeys = map[stats.GroupBy][]string{
	stats.Day:         {"day"},
	stats.Hour:        {"hour"},
	stats.Program:     {"program_id"},
	stats.Affiliate:   {"affiliate_id"},
	stats.Link:        {"link_id", "program_id", "affiliate_id"},
	stats.Sub1:        {"sub1"},
	stats.Attribution: {"attribution"},
	stats.Country:     {"country"},
	stats.Region:      {"region", "country"},
	stats.City:        {"city", "region", "country"},
	stats.ASN:         {"asn", "as_org"},
	stats.Device:      {"device"},
	stats.Browser:     {"browser"},
	stats.OS:          {"os"},
	stats.Referrer:    {"referrer"},
	stats.UTMSource:   {"utm_source"},
	stats.UTMCampaign: {"utm_campaign"},
}

func statsKey(g stats.GroupBy, r stats.Row) []string {
	switch g {
	case stats.Day:
		return []string{r.Day.Format(time.DateOnly)}
	case stats.Hour:
		return []string{r.Hour.Format(time.RFC3339)}
	case stats.Program:
		return []string{r.ProgramID}
	case stats.Affiliate:
		return []string{r.AffiliateID}
	case stats.Link:
		return []string{r.LinkID, r.ProgramID, r.AffiliateID}
	case stats.Attribution:
		return []string{r.Attribution}
	case stats.Country:
		return []string{r.Country}
	case stats.Region:
		return []string{r.Region, r.Country}
	case stats.City:
		return []string{r.City, r.Region, r.Country}
	case stats.ASN:
		return []string{strconv.FormatUint(uint64(r.ASN), 10), r.ASOrg}
	case stats.Device:
		return []string{r.Device}
	case stats.Browser:
		return []string{r.Browser}
	case stats.OS:
		return []string{r.OS}
	case stats.Referrer:
		return []string{r.Referrer}
	case stats.UTMSource:
		return []string{r.UTMSource}
	case stats.UTMCampaign:
		return []string{r.UTMCampaign}
	}
	return []string{r.Sub1}
}

// Stats is the file of a statistics report grouped by g: the group's key columns, then its
// figures per currency (stats.Service.Rows), then the names of its keys from names.
func Stats(g stats.GroupBy, names conversions.Names) Table[stats.Row] {
	keys := statsKeys[g]
	return Table[stats.Row]{
		Columns: cols(text(keys...), text("currency"), number("clicks", "unique_clicks", "conversions", "pending", "approved",
			"rejected", "paid", "reversed", "sale_amount", "commission", "epc", "conversion_rate"), text(statsNames[g]...)),
		Record: func(v stats.Row, r []string) {
			c := v.Conversions
			n := copy(r, statsKey(g, v))
			i := func(x int64) string { return strconv.FormatInt(x, 10) }
			n += copy(r[n:], []string{v.Currency, i(v.Clicks), i(v.UniqueClicks), i(c.Total), i(c.Pending), i(c.Approved), i(c.Rejected),
				i(c.Paid), i(c.Reversed), money.FormatSum(v.SaleAmount, v.Currency), money.FormatSum(v.Commission, v.Currency),
				money.FormatSum(v.EPC(), v.Currency), strconv.FormatFloat(v.ConversionRate(), 'f', -1, 64)})
			copy(r[n:], statsName(g, v, names))
		},
	}
}
