package conversions

import "time"

// exchangeInsert are the snapshot columns, the same on conversions and commissions.
const exchangeInsert = `original_amount, original_currency, exchange_rate, rate_date, converted_amount`

// values are the insert arguments of the snapshot columns: all NULL without one.
func (e *Exchange) values() []any {
	if e == nil {
		return []any{nil, nil, nil, nil, nil}
	}
	return []any{e.OriginalAmount, e.OriginalCurrency, e.Rate, e.RateDate, e.ConvertedAmount}
}

// exchangeColumns scans the nullable snapshot columns (the rate read with trim_scale, so it
// reads as it was set, without NUMERIC(24, 12)'s trailing zeros).
type exchangeColumns struct {
	amount, converted *int64
	currency, rate    *string
	date              *time.Time
}

func (x exchangeColumns) exchange() *Exchange {
	if x.amount == nil || x.currency == nil || x.rate == nil || x.date == nil || x.converted == nil {
		return nil
	}
	return &Exchange{OriginalAmount: *x.amount, OriginalCurrency: *x.currency, Rate: *x.rate,
		RateDate: x.date.UTC(), ConvertedAmount: *x.converted}
}
