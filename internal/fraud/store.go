package fraud

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

var defaults = Defaults()

// ErrNotFound: no such program or partnership of the advertiser. Another company's is
// answered the same way.
var ErrNotFound = errors.New("not found")

// Service keeps the programs' rule settings and the partnerships' exemptions.
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

// Program is a program's rules as its advertiser reads them.
type Program struct {
	ProgramID  string
	Settings   Settings
	UpdatedAt  *time.Time          // nil: never configured, every rule at its default
	Exemptions map[string][]string // reason codes switched off, by partnership
}

// ParseStored reads the stored settings of a program (the rules column; nil or empty:
// none) laid over the defaults. The result is read-only: a program without settings shares
// one copy of the defaults, as registration reads them for every conversion.
func ParseStored(raw []byte) (Settings, error) {
	if len(raw) == 0 {
		return defaults, nil
	}
	var stored Settings
	if err := json.Unmarshal(raw, &stored); err != nil {
		return nil, fmt.Errorf("read fraud settings: %w", err)
	}
	return Merge(stored), nil
}

// Get returns the rules of one of the advertiser's programs.
func (s *Service) Get(ctx context.Context, advertiserID, programID string) (Program, error) {
	return s.get(ctx, s.db, advertiserID, programID, false)
}

type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

func (s *Service) get(ctx context.Context, q querier, advertiserID, programID string, lock bool) (Program, error) {
	p := Program{ProgramID: programID}
	var raw []byte
	forUpdate := ""
	if lock {
		forUpdate = " FOR UPDATE OF p"
	}
	err := q.QueryRow(ctx, `SELECT f.rules, f.updated_at FROM programs p LEFT JOIN fraud_settings f ON f.program_id = p.id
		WHERE p.id = $1 AND p.advertiser_id = $2`+forUpdate, programID, advertiserID).Scan(&raw, &p.UpdatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return Program{}, fmt.Errorf("program %s: %w", programID, ErrNotFound)
	}
	if err != nil {
		return Program{}, fmt.Errorf("read fraud settings of %s: %w", programID, err)
	}
	if p.Settings, err = ParseStored(raw); err != nil {
		return Program{}, err
	}
	if p.UpdatedAt != nil {
		u := p.UpdatedAt.UTC()
		p.UpdatedAt = &u
	}
	rows, err := q.Query(ctx, `SELECT e.partnership_id, e.code FROM fraud_exemptions e JOIN partnerships t ON t.id = e.partnership_id
		WHERE t.program_id = $1 ORDER BY e.partnership_id, e.code`, programID)
	if err != nil {
		return Program{}, fmt.Errorf("read fraud exemptions of %s: %w", programID, err)
	}
	p.Exemptions = map[string][]string{}
	var ptn, code string
	if _, err := pgx.ForEachRow(rows, []any{&ptn, &code}, func() error {
		p.Exemptions[ptn] = append(p.Exemptions[ptn], code)
		return nil
	}); err != nil {
		return Program{}, fmt.Errorf("read fraud exemptions of %s: %w", programID, err)
	}
	return p, nil
}

// Update applies changes to the rules of one of the advertiser's programs and returns them; a
// *ValidationError names every invalid field, and then nothing changes.
func (s *Service) Update(ctx context.Context, advertiserID, programID string, changes map[string]Change) (Program, error) {
	var out Program
	err := pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		cur, err := s.get(ctx, tx, advertiserID, programID, true)
		if err != nil {
			return err
		}
		next, err := Apply(cur.Settings, changes)
		if err != nil {
			return err
		}
		raw, err := json.Marshal(next)
		if err != nil {
			return fmt.Errorf("encode fraud settings: %w", err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO fraud_settings (program_id, rules, updated_at) VALUES ($1, $2, $3)
			ON CONFLICT (program_id) DO UPDATE SET rules = excluded.rules, updated_at = excluded.updated_at`,
			programID, raw, s.now()); err != nil {
			return fmt.Errorf("store fraud settings of %s: %w", programID, err)
		}
		out, err = s.get(ctx, tx, advertiserID, programID, false)
		return err
	})
	if err != nil {
		return Program{}, err
	}
	return out, nil
}

// SetExemptions replaces the reason codes switched off for one partnership of the
// advertiser's programs and returns them; an unknown code is a *ValidationError.
func (s *Service) SetExemptions(ctx context.Context, advertiserID, partnershipID string, codes []string) ([]string, error) {
	var errs []FieldError
	clean := []string{}
	for i, c := range codes {
		if _, ok := Lookup(c); !ok {
			errs = append(errs, FieldError{Field: fmt.Sprintf("codes[%d]", i), Message: "is not a reason code; known: " + strings.Join(Codes(), ", ")})
		} else if !slices.Contains(clean, c) {
			clean = append(clean, c)
		}
	}
	if errs != nil {
		return nil, &ValidationError{Fields: errs}
	}
	slices.Sort(clean)
	err := pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		var id string
		err := tx.QueryRow(ctx, `SELECT id FROM partnerships WHERE id = $1 AND advertiser_id = $2 FOR UPDATE`, partnershipID, advertiserID).Scan(&id)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("partnership %s: %w", partnershipID, ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("read partnership %s: %w", partnershipID, err)
		}
		if _, err := tx.Exec(ctx, `DELETE FROM fraud_exemptions WHERE partnership_id = $1 AND NOT (code = ANY($2))`, partnershipID, clean); err != nil {
			return fmt.Errorf("store fraud exemptions: %w", err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO fraud_exemptions (partnership_id, code, created_at) SELECT $1, c, $3 FROM unnest($2::text[]) c
			ON CONFLICT DO NOTHING`, partnershipID, clean, s.now()); err != nil {
			return fmt.Errorf("store fraud exemptions: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return clean, nil
}

// Partnership names a partnership by its program and affiliate, as ClickHouse's rows do.
type Partnership struct{ ProgramID, AffiliateID string }

// Exemptions returns the reason codes switched off for the partnerships of the advertiser's
// programs that have any (of one program when programID is not empty).
func (s *Service) Exemptions(ctx context.Context, advertiserID, programID string) (map[Partnership][]string, error) {
	rows, err := s.db.Query(ctx, `SELECT t.program_id, t.affiliate_id, e.code FROM fraud_exemptions e JOIN partnerships t ON t.id = e.partnership_id
		WHERE t.advertiser_id = $1 AND ($2 = '' OR t.program_id = $2) ORDER BY e.code`, advertiserID, programID)
	if err != nil {
		return nil, fmt.Errorf("read fraud exemptions of %s: %w", advertiserID, err)
	}
	out := map[Partnership][]string{}
	var p Partnership
	var code string
	if _, err := pgx.ForEachRow(rows, []any{&p.ProgramID, &p.AffiliateID, &code}, func() error {
		out[p] = append(out[p], code)
		return nil
	}); err != nil {
		return nil, fmt.Errorf("read fraud exemptions of %s: %w", advertiserID, err)
	}
	return out, nil
}

// Execer is a transaction (or pool) to write verdicts in.
type Execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// Record writes findings of a commission in the caller's transaction. A rule that already
// has a verdict of the same kind keeps it (a later stage deciding it again adds nothing).
func Record(ctx context.Context, tx Execer, commissionID string, findings []Finding) error {
	if len(findings) == 0 {
		return nil
	}
	codes, shadows, actions, observed, stages, at := make([]string, len(findings)), make([]bool, len(findings)),
		make([]string, len(findings)), make([]string, len(findings)), make([]string, len(findings)), make([]time.Time, len(findings))
	for i, f := range findings {
		codes[i], shadows[i], actions[i], observed[i], stages[i], at[i] = f.Code, f.Shadow, f.Action, truncate(f.Observed, 255), f.Stage, f.DecidedAt
	}
	if _, err := tx.Exec(ctx, `INSERT INTO fraud_verdicts (commission_id, code, shadow, action, observed, stage, decided_at)
		SELECT $1, * FROM unnest($2::text[], $3::boolean[], $4::text[], $5::text[], $6::text[], $7::timestamptz[])
		ON CONFLICT DO NOTHING`, commissionID, codes, shadows, actions, observed, stages, at); err != nil {
		return fmt.Errorf("record fraud verdicts of %s: %w", commissionID, err)
	}
	return nil
}

func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n])
}

// VerdictColumns reads a commission's findings as JSON, given its alias c: the expression for
// a SELECT list, scanned with ScanFindings.
const VerdictColumns = `(SELECT json_agg(json_build_object('code', f.code, 'action', f.action, 'observed', f.observed,
	'shadow', f.shadow, 'stage', f.stage, 'decided_at', f.decided_at) ORDER BY f.decided_at, f.code, f.shadow)
	FROM fraud_verdicts f WHERE f.commission_id = c.id)`

// ScanFindings decodes what VerdictColumns read.
func ScanFindings(raw []byte) ([]Finding, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	var out []Finding
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, fmt.Errorf("read fraud verdicts: %w", err)
	}
	for i := range out {
		out[i].DecidedAt = out[i].DecidedAt.UTC()
	}
	return out, nil
}
