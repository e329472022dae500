// Package demo seeds the data a newcomer sees after `make run`: a demo advertiser and a demo
// affiliate, each with an owner and an API key, written to a JSON file that scripts can read.
// Seeding is idempotent: a second run finds the same companies and reuses keys that still work.
package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/partnerstream/partnerstream/internal/auth"
	"github.com/partnerstream/partnerstream/internal/identity"
	"github.com/partnerstream/partnerstream/internal/session"
)

// Account is one demo company as scripts see it.
type Account struct {
	CompanyID string `json:"company_id"`
	APIKey    string `json:"api_key"`
	Email     string `json:"email"`
	// SessionToken is a dashboard session of the owner (dev only), for scripts.
	SessionToken string `json:"session_token,omitempty"`
}

// File is the content of .local/demo.json.
type File struct {
	BaseURL    string  `json:"base_url"`
	Advertiser Account `json:"advertiser"`
	Affiliate  Account `json:"affiliate"`
	// ProgramID and TrackingURL are the demo program and the affiliate's link to it.
	ProgramID   string `json:"program_id,omitempty"`
	TrackingURL string `json:"tracking_url,omitempty"`
}

// Store is what seeding needs from the identity store.
type Store interface {
	UserByEmail(ctx context.Context, email string) (identity.User, error)
	CreateCompany(ctx context.Context, in identity.NewCompany) (identity.Company, identity.User, error)
	CreateAPIKey(ctx context.Context, companyID, name string) (string, identity.APIKey, error)
	LookupKey(ctx context.Context, hash []byte) (auth.KeyRecord, error)
}

// Sessions issues the demo users' dashboard tokens.
type Sessions interface {
	Issue(ctx context.Context, s session.Subject, meta session.Meta) (session.Tokens, error)
}

// Demo e-mail addresses; the .local domain never receives mail.
const (
	AdvertiserEmail = "advertiser@demo.partnerstream.local"
	AffiliateEmail  = "affiliate@demo.partnerstream.local"
)

// Seed makes sure the demo companies exist and writes the file at path; with sessions, each
// account also gets a dashboard session token.
func Seed(ctx context.Context, s Store, sessions Sessions, baseURL, path string) (File, error) {
	var prev File
	if b, err := os.ReadFile(path); err == nil {
		_ = json.Unmarshal(b, &prev) // a broken file is simply rewritten
	}
	adv, err := ensure(ctx, s, sessions, identity.NewCompany{Kind: identity.Advertiser, Name: "Demo Brand", OwnerEmail: AdvertiserEmail, OwnerName: "Ada Advertiser"}, prev.Advertiser)
	if err != nil {
		return File{}, err
	}
	aff, err := ensure(ctx, s, sessions, identity.NewCompany{Kind: identity.Affiliate, Name: "Demo Publisher", OwnerEmail: AffiliateEmail, OwnerName: "Alex Affiliate"}, prev.Affiliate)
	if err != nil {
		return File{}, err
	}
	f := File{BaseURL: baseURL, Advertiser: adv, Affiliate: aff}
	if err := write(path, f); err != nil {
		return File{}, err
	}
	return f, nil
}

func ensure(ctx context.Context, s Store, sessions Sessions, in identity.NewCompany, prev Account) (Account, error) {
	u, err := s.UserByEmail(ctx, in.OwnerEmail)
	switch {
	case errors.Is(err, identity.ErrNotFound):
		_, u, err = s.CreateCompany(ctx, in)
		if err != nil {
			return Account{}, fmt.Errorf("seed %s: %w", in.Kind, err)
		}
	case err != nil:
		return Account{}, fmt.Errorf("seed %s: %w", in.Kind, err)
	}
	acc := Account{CompanyID: u.CompanyID, Email: u.Email}
	if acc.APIKey, err = ensureKey(ctx, s, u.CompanyID, prev.APIKey); err != nil {
		return Account{}, fmt.Errorf("seed %s key: %w", in.Kind, err)
	}
	if sessions != nil {
		t, err := sessions.Issue(ctx, session.Subject{UserID: u.ID, CompanyID: u.CompanyID, CompanyKind: in.Kind, Role: u.Role, Locale: u.Locale}, session.Meta{UserAgent: "partnerstream dev seed"})
		if err != nil {
			return Account{}, fmt.Errorf("seed %s session: %w", in.Kind, err)
		}
		acc.SessionToken = t.Access
	}
	return acc, nil
}

// ensureKey keeps the previous demo key while it still works, so scripts keep theirs.
func ensureKey(ctx context.Context, s Store, companyID, prev string) (string, error) {
	if _, err := auth.ParseKey(prev); err == nil {
		if k, err := s.LookupKey(ctx, auth.HashKey(prev)); err == nil && k.CompanyID == companyID {
			return prev, nil
		}
	}
	key, _, err := s.CreateAPIKey(ctx, companyID, "demo")
	return key, err
}

// write replaces the file atomically; it holds API keys, so only the owner may read it.
func write(path string, f File) error {
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("demo file: %w", err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("demo file: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("demo file: %w", err)
	}
	return nil
}
