// Package identity owns companies, their users and their API keys in Postgres.
package identity

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/partnerstream/partnerstream/internal/auth"
	"github.com/partnerstream/partnerstream/internal/ids"
)

// Company kinds.
const (
	Advertiser = "advertiser"
	Affiliate  = "affiliate"
)

// Company is an advertiser (brand) or an affiliate.
type Company struct {
	ID        string    `json:"id"`
	Kind      string    `json:"kind"`
	Name      string    `json:"name"`
	Locale    string    `json:"locale"`
	CreatedAt time.Time `json:"created_at"`
}

// User belongs to one company.
type User struct {
	ID        string    `json:"id"`
	CompanyID string    `json:"company_id"`
	Email     string    `json:"email"`
	Name      string    `json:"name"`
	Role      string    `json:"role"`
	Locale    string    `json:"locale"`
	CreatedAt time.Time `json:"created_at"`
}

// APIKey is the stored record of a key; the key itself is only shown when created.
type APIKey struct {
	ID         string     `json:"id"`
	CompanyID  string     `json:"company_id"`
	Name       string     `json:"name"`
	Prefix     string     `json:"prefix"`
	CreatedAt  time.Time  `json:"created_at"`
	LastUsedAt *time.Time `json:"last_used_at"`
	// Kind is KeySecret or KeyPublishable; a publishable key belongs to ProgramID.
	Kind      string  `json:"kind"`
	ProgramID *string `json:"program_id"`
}

// Kinds of API keys.
const (
	KeySecret      = "secret"
	KeyPublishable = "publishable"
)

// ErrNotFound is returned when a looked-up record does not exist.
var ErrNotFound = errors.New("not found")

// Store is the Postgres store of identities.
type Store struct{ db *pgxpool.Pool }

// NewStore returns a store on the pool.
func NewStore(db *pgxpool.Pool) *Store { return &Store{db: db} }

// NewCompany is what registering a company needs: the company and its first user (owner).
type NewCompany struct {
	Kind, Name, Locale string
	OwnerEmail         string
	OwnerName          string
}

// CreateCompany creates a company with its owner in one transaction.
func (s *Store) CreateCompany(ctx context.Context, in NewCompany) (Company, User, error) {
	if in.Kind != Advertiser && in.Kind != Affiliate {
		return Company{}, User{}, fmt.Errorf("company kind %q: want advertiser or affiliate", in.Kind)
	}
	if in.Locale == "" {
		in.Locale = "en"
	}
	c := Company{ID: ids.New(ids.Company), Kind: in.Kind, Name: in.Name, Locale: in.Locale}
	u := User{ID: ids.New(ids.User), CompanyID: c.ID, Email: strings.ToLower(strings.TrimSpace(in.OwnerEmail)), Name: in.OwnerName, Role: "owner", Locale: in.Locale}
	err := pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx,
			`INSERT INTO companies (id, kind, name, locale) VALUES ($1, $2, $3, $4) RETURNING created_at`,
			c.ID, c.Kind, c.Name, c.Locale).Scan(&c.CreatedAt); err != nil {
			return fmt.Errorf("insert company: %w", err)
		}
		if err := tx.QueryRow(ctx,
			`INSERT INTO users (id, company_id, email, name, role, locale) VALUES ($1, $2, $3, $4, $5, $6) RETURNING created_at`,
			u.ID, u.CompanyID, u.Email, u.Name, u.Role, u.Locale).Scan(&u.CreatedAt); err != nil {
			return fmt.Errorf("insert owner: %w", err)
		}
		return nil
	})
	if err != nil {
		return Company{}, User{}, fmt.Errorf("create company: %w", err)
	}
	return c, u, nil
}

// UserByEmail finds a user by e-mail (case-insensitive).
func (s *Store) UserByEmail(ctx context.Context, email string) (User, error) {
	return s.user(ctx, "lower(email) = lower($1)", strings.TrimSpace(email))
}

// CreateAPIKey makes a key for the company and returns it once, with its record.
func (s *Store) CreateAPIKey(ctx context.Context, companyID, name string) (string, APIKey, error) {
	key, display, hash := auth.NewKey()
	k := APIKey{ID: ids.New(ids.APIKey), CompanyID: companyID, Name: name, Prefix: display, Kind: KeySecret}
	err := s.db.QueryRow(ctx,
		`INSERT INTO api_keys (id, company_id, name, prefix, hash) VALUES ($1, $2, $3, $4, $5) RETURNING created_at`,
		k.ID, k.CompanyID, k.Name, k.Prefix, hash).Scan(&k.CreatedAt)
	if err != nil {
		return "", APIKey{}, fmt.Errorf("create api key: %w", err)
	}
	return key, k, nil
}

// RecordLogin stamps the user's last sign-in.
func (s *Store) RecordLogin(ctx context.Context, userID string) error {
	if _, err := s.db.Exec(ctx, `UPDATE users SET last_login_at = now() WHERE id = $1`, userID); err != nil {
		return fmt.Errorf("record login: %w", err)
	}
	return nil
}

// UserByID returns a user.
func (s *Store) UserByID(ctx context.Context, id string) (User, error) {
	return s.user(ctx, "id = $1", id)
}

// user reads the one user matching where (a fixed condition with one parameter).
func (s *Store) user(ctx context.Context, where string, arg any) (User, error) {
	var u User
	err := s.db.QueryRow(ctx,
		`SELECT id, company_id, email, name, role, locale, created_at FROM users WHERE `+where, arg).
		Scan(&u.ID, &u.CompanyID, &u.Email, &u.Name, &u.Role, &u.Locale, &u.CreatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return User{}, ErrNotFound
	}
	if err != nil {
		return User{}, fmt.Errorf("user: %w", err)
	}
	return u, nil
}

// Recipient is a user a company's notices are e-mailed to, in the user's language.
type Recipient struct{ Email, Locale string }

// Querier is a transaction or a pool.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// Admins reads a company's owners and admins, who are told what needs their decision (its
// members are not), ordered by e-mail, in q (the caller's transaction, or a pool).
func Admins(ctx context.Context, q Querier, companyID string) ([]Recipient, error) {
	rows, err := q.Query(ctx, `SELECT email, locale FROM users WHERE company_id = $1 AND role IN ('owner', 'admin') ORDER BY email`, companyID)
	if err != nil {
		return nil, fmt.Errorf("find the admins of %s: %w", companyID, err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[Recipient])
	if err != nil {
		return nil, fmt.Errorf("find the admins of %s: %w", companyID, err)
	}
	return out, nil
}
