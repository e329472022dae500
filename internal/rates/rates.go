// Package rates keeps the exchange rates a company converts its conversions with: per day and
// currency pair, exact decimals, set by hand or uploaded as CSV, never fetched from anywhere.
// An advertiser keeps its own; the operator keeps any company's (docs/conversions.md,
// "Exchange rates"). A rate of base/quote on a day says one unit of base is worth rate units
// of quote on that day; the inverse pair is a rate of its own (no rate is ever inverted).
package rates

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/partnerstream/partnerstream/internal/money"
	"github.com/partnerstream/partnerstream/internal/page"
)

// MaxImportLines caps one CSV upload (a year of daily rates for 27 pairs fits).
const MaxImportLines = 10000

// Rate is one day's rate of a currency pair.
type Rate struct {
	CompanyID string
	Base      string
	Quote     string
	Day       time.Time // midnight UTC
	Rate      string    // canonical decimal (money.ParseRate)
	UpdatedAt time.Time
}

// NewRate is a rate as given: every field a string, checked by Check.
type NewRate struct{ Day, Base, Quote, Rate string }

// FieldError names what is wrong with one field of a rate.
type FieldError struct{ Field, Message string }

// InvalidError is a rate that fails validation.
type InvalidError struct{ Errors []FieldError }

func (e *InvalidError) Error() string {
	parts := make([]string, len(e.Errors))
	for i, f := range e.Errors {
		parts[i] = f.Field + ": " + f.Message
	}
	return strings.Join(parts, "; ")
}

// LineError is what is wrong with one line of a CSV upload (1-based, the header is line 1).
type LineError struct {
	Line   int
	Errors []FieldError
}

// ImportError refuses a whole upload: nothing of it was stored.
type ImportError struct{ Lines []LineError }

func (e *ImportError) Error() string {
	return fmt.Sprintf("%d lines of the upload are invalid", len(e.Lines))
}

// ErrNoRate: no rate of the pair on the day or the days allowed before it.
var ErrNoRate = errors.New("no exchange rate")

// NoRateError is ErrNoRate for one pair and day.
type NoRateError struct {
	Base, Quote string
	Day         time.Time
	MaxAgeDays  int
}

func (e *NoRateError) Error() string {
	return fmt.Sprintf("no %s/%s exchange rate on %s or the %d days before", e.Base, e.Quote, e.Day.Format(time.DateOnly), e.MaxAgeDays)
}

// Is makes a NoRateError match ErrNoRate.
func (e *NoRateError) Is(target error) bool { return target == ErrNoRate }

// Check validates a rate and returns it parsed.
func Check(in NewRate) (Rate, error) {
	var errs []FieldError
	day, err := time.Parse(time.DateOnly, in.Day)
	if err != nil {
		errs = append(errs, FieldError{"date", "must be a date such as 2026-03-14"})
	}
	for _, f := range []struct{ name, v string }{{"base", in.Base}, {"quote", in.Quote}} {
		if !money.ValidCurrency(f.v) {
			errs = append(errs, FieldError{f.name, "must be an ISO 4217 code in upper case"})
		}
	}
	if in.Base != "" && in.Base == in.Quote {
		errs = append(errs, FieldError{"quote", "must differ from base"})
	}
	rate, err := money.ParseRate(in.Rate)
	if err != nil {
		errs = append(errs, FieldError{"rate", fmt.Sprintf("must be a decimal above 0 with at most %d digits before the point and %d after it", money.RateIntDigits, money.RateFracDigits)})
	}
	if errs != nil {
		return Rate{}, &InvalidError{Errors: errs}
	}
	return Rate{Base: in.Base, Quote: in.Quote, Day: day, Rate: rate}, nil
}

// Service stores the rates.
type Service struct {
	db  *pgxpool.Pool
	now func() time.Time
}

// New returns the service; now is the clock (time.Now when nil).
func New(db *pgxpool.Pool, now func() time.Time) *Service {
	if now == nil {
		now = time.Now
	}
	return &Service{db: db, now: func() time.Time { return now().UTC() }}
}

// Set stores one rate of company, replacing the day's rate of the pair if there is one.
func (s *Service) Set(ctx context.Context, companyID string, in NewRate) (Rate, error) {
	r, err := Check(in)
	if err != nil {
		return Rate{}, err
	}
	r.CompanyID, r.UpdatedAt = companyID, s.now()
	if err := upsert(ctx, s.db, r); err != nil {
		return Rate{}, err
	}
	return r, nil
}

// Import stores the rates of a CSV upload with the header date,base,quote,rate: all of
// them, or none when any line is invalid (every invalid line is reported). It returns how
// many rates were stored.
func (s *Service) Import(ctx context.Context, companyID string, r io.Reader) (int, error) {
	list, err := parseCSV(r)
	if err != nil {
		return 0, err
	}
	now := s.now()
	err = pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		for _, rate := range list {
			rate.CompanyID, rate.UpdatedAt = companyID, now
			if err := upsert(ctx, tx, rate); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return len(list), nil
}

var header = []string{"date", "base", "quote", "rate"}

func parseCSV(r io.Reader) ([]Rate, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	cr.TrimLeadingSpace = true
	var list []Rate
	var bad []LineError
	seen := map[string]int{}
	for line := 1; ; line++ {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			var pe *csv.ParseError
			if errors.As(err, &pe) {
				bad = append(bad, LineError{Line: pe.Line, Errors: []FieldError{{"line", pe.Err.Error()}}})
				return nil, &ImportError{Lines: bad}
			}
			return nil, &ImportError{Lines: append(bad, LineError{Line: line, Errors: []FieldError{{"line", "cannot be read as CSV"}}})}
		}
		if line == 1 {
			if len(rec) > 0 {
				rec[0] = strings.TrimPrefix(rec[0], "\ufeff") // a spreadsheet's byte order mark
			}
			if !equalFold(rec, header) {
				return nil, &ImportError{Lines: []LineError{{Line: 1, Errors: []FieldError{{"header", "must be date,base,quote,rate"}}}}}
			}
			continue
		}
		if len(list)+len(bad) >= MaxImportLines {
			return nil, &ImportError{Lines: []LineError{{Line: line, Errors: []FieldError{{"line", fmt.Sprintf("an upload holds at most %d rates", MaxImportLines)}}}}}
		}
		if len(rec) != len(header) {
			bad = append(bad, LineError{Line: line, Errors: []FieldError{{"line", fmt.Sprintf("must have 4 fields, has %d", len(rec))}}})
			continue
		}
		rate, err := Check(NewRate{Day: rec[0], Base: rec[1], Quote: rec[2], Rate: rec[3]})
		var inv *InvalidError
		if errors.As(err, &inv) {
			bad = append(bad, LineError{Line: line, Errors: inv.Errors})
			continue
		}
		key := rate.Base + rate.Quote + rate.Day.Format(time.DateOnly)
		if first, dup := seen[key]; dup {
			bad = append(bad, LineError{Line: line, Errors: []FieldError{{"date", fmt.Sprintf("%s/%s on %s is already on line %d", rate.Base, rate.Quote, rec[0], first)}}})
			continue
		}
		seen[key] = line
		list = append(list, rate)
	}
	if bad != nil {
		return nil, &ImportError{Lines: bad}
	}
	if len(list) == 0 {
		return nil, &ImportError{Lines: []LineError{{Line: 1, Errors: []FieldError{{"file", "holds no rates below the header date,base,quote,rate"}}}}}
	}
	return list, nil
}

func equalFold(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !strings.EqualFold(strings.TrimSpace(a[i]), b[i]) {
			return false
		}
	}
	return true
}

// execer is a pool or a transaction.
type execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

func upsert(ctx context.Context, q execer, r Rate) error {
	_, err := q.Exec(ctx, `INSERT INTO exchange_rates (company_id, base, quote, day, rate, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6)
		ON CONFLICT (company_id, base, quote, day) DO UPDATE SET rate = EXCLUDED.rate, updated_at = EXCLUDED.updated_at`,
		r.CompanyID, r.Base, r.Quote, r.Day, r.Rate, r.UpdatedAt)
	if err != nil {
		return fmt.Errorf("store rate %s/%s on %s: %w", r.Base, r.Quote, r.Day.Format(time.DateOnly), err)
	}
	return nil
}

// Filter narrows a list: a currency as base or quote, and days in [From, To] (zero: open).
type Filter struct {
	Base, Quote string
	From, To    time.Time
}

// List returns company's rates, newest day first (then by pair), a page at a time.
func (s *Service) List(ctx context.Context, companyID string, f Filter, p page.Request) ([]Rate, string, error) {
	where := []string{"company_id = $1"}
	args := []any{companyID}
	arg := func(v any) string { args = append(args, v); return fmt.Sprintf("$%d", len(args)) }
	if f.Base != "" {
		where = append(where, "base = "+arg(f.Base))
	}
	if f.Quote != "" {
		where = append(where, "quote = "+arg(f.Quote))
	}
	if !f.From.IsZero() {
		where = append(where, "day >= "+arg(f.From))
	}
	if !f.To.IsZero() {
		where = append(where, "day <= "+arg(f.To))
	}
	if p.Before != "" {
		day, pair, ok := strings.Cut(p.Before, " ")
		d, err := time.Parse(time.DateOnly, day)
		if !ok || err != nil || len(pair) != 6 {
			return nil, "", fmt.Errorf("%w", page.ErrBadCursor)
		}
		// day descending, then the pair ascending
		where = append(where, fmt.Sprintf("(day < %s OR (day = %[1]s AND (base, quote) > (%s, %s)))", arg(d), arg(pair[:3]), arg(pair[3:])))
	}
	rows, err := s.db.Query(ctx, `SELECT `+rateColumns+` FROM exchange_rates WHERE `+strings.Join(where, " AND ")+
		fmt.Sprintf(" ORDER BY day DESC, base, quote LIMIT %d", p.Limit+1), args...)
	if err != nil {
		return nil, "", fmt.Errorf("list rates: %w", err)
	}
	list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Rate, error) { return scan(r) })
	if err != nil {
		return nil, "", fmt.Errorf("list rates: %w", err)
	}
	list, next := page.Cut(list, p.Limit, func(r Rate) string { return r.Day.Format(time.DateOnly) + " " + r.Base + r.Quote })
	return list, next, nil
}

// InForce returns company's rate of base/quote in force on the day of at: the latest on or
// before that day and at most maxAgeDays before it. ErrNoRate when there is none.
func (s *Service) InForce(ctx context.Context, companyID, base, quote string, at time.Time, maxAgeDays int) (Rate, error) {
	day := at.UTC().Truncate(24 * time.Hour)
	r, err := scan(s.db.QueryRow(ctx, `SELECT `+rateColumns+` FROM exchange_rates
		WHERE company_id = $1 AND base = $2 AND quote = $3 AND day <= $4 AND day >= $5
		ORDER BY day DESC LIMIT 1`, companyID, base, quote, day, day.AddDate(0, 0, -maxAgeDays)))
	if errors.Is(err, pgx.ErrNoRows) {
		return Rate{}, &NoRateError{Base: base, Quote: quote, Day: day, MaxAgeDays: maxAgeDays}
	}
	if err != nil {
		return Rate{}, fmt.Errorf("read rate %s/%s: %w", base, quote, err)
	}
	return r, nil
}

// rateColumns read the rate with trim_scale: as it was set (money.ParseRate's canonical
// form), without NUMERIC(24, 12)'s trailing zeros.
const rateColumns = `company_id, base, quote, day, trim_scale(rate)::text, updated_at`

func scan(row pgx.Row) (Rate, error) {
	var r Rate
	if err := row.Scan(&r.CompanyID, &r.Base, &r.Quote, &r.Day, &r.Rate, &r.UpdatedAt); err != nil {
		return Rate{}, err
	}
	r.Day, r.UpdatedAt = r.Day.UTC(), r.UpdatedAt.UTC()
	return r, nil
}
