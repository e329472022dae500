package identity

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/partnerstream/partnerstream/internal/auth"
	"github.com/partnerstream/partnerstream/internal/ids"
	"github.com/partnerstream/partnerstream/internal/page"
)

// LookupKey implements auth.KeyStore: the active key with this hash and its company.
func (s *Store) LookupKey(ctx context.Context, hash []byte) (auth.KeyRecord, error) {
	r := auth.KeyRecord{Hash: hash}
	err := s.db.QueryRow(ctx,
		`SELECT k.id, k.company_id, c.kind FROM api_keys k JOIN companies c ON c.id = k.company_id
		  WHERE k.hash = $1 AND k.revoked_at IS NULL AND k.kind = 'secret'`, hash).Scan(&r.KeyID, &r.CompanyID, &r.CompanyKind)
	if errors.Is(err, pgx.ErrNoRows) {
		return auth.KeyRecord{}, auth.ErrUnknownKey
	}
	if err != nil {
		return auth.KeyRecord{}, fmt.Errorf("lookup api key: %w", err)
	}
	return r, nil
}

// CreatePublishableKey makes a publishable key of the advertiser's program, or ErrNotFound
// when the company has no such program. Like a secret key, only its hash is kept.
func (s *Store) CreatePublishableKey(ctx context.Context, companyID, programID, name string) (string, APIKey, error) {
	key, display, hash := auth.NewPublishableKey()
	k := APIKey{ID: ids.New(ids.APIKey), CompanyID: companyID, Name: name, Prefix: display, Kind: KeyPublishable, ProgramID: &programID}
	err := s.db.QueryRow(ctx, `INSERT INTO api_keys (id, company_id, name, prefix, hash, kind, program_id)
		SELECT $1, $2, $3, $4, $5, 'publishable', id FROM programs WHERE id = $6 AND advertiser_id = $2 RETURNING created_at`,
		k.ID, k.CompanyID, k.Name, k.Prefix, hash, programID).Scan(&k.CreatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", APIKey{}, ErrNotFound
	}
	if err != nil {
		return "", APIKey{}, fmt.Errorf("create publishable key: %w", err)
	}
	return key, k, nil
}

// PublishableKey is what a publishable key authenticates as.
type PublishableKey struct{ KeyID, CompanyID, ProgramID string }

// LookupPublishableKey returns the active publishable key with this hash, or
// auth.ErrUnknownKey.
func (s *Store) LookupPublishableKey(ctx context.Context, hash []byte) (PublishableKey, error) {
	var k PublishableKey
	err := s.db.QueryRow(ctx, `SELECT id, company_id, program_id FROM api_keys
		WHERE hash = $1 AND revoked_at IS NULL AND kind = 'publishable'`, hash).Scan(&k.KeyID, &k.CompanyID, &k.ProgramID)
	if errors.Is(err, pgx.ErrNoRows) {
		return PublishableKey{}, auth.ErrUnknownKey
	}
	if err != nil {
		return PublishableKey{}, fmt.Errorf("lookup publishable key: %w", err)
	}
	return k, nil
}

// TouchKeys implements auth.KeyStore.
func (s *Store) TouchKeys(ctx context.Context, keyIDs []string, at time.Time) error {
	_, err := s.db.Exec(ctx, `UPDATE api_keys SET last_used_at = $2 WHERE id = ANY($1) AND (last_used_at IS NULL OR last_used_at < $2)`, keyIDs, at)
	if err != nil {
		return fmt.Errorf("touch api keys: %w", err)
	}
	return nil
}

// ListAPIKeys lists the company's active keys, newest first.
func (s *Store) ListAPIKeys(ctx context.Context, companyID string, p page.Request) ([]APIKey, string, error) {
	rows, err := s.db.Query(ctx,
		`SELECT id, company_id, name, prefix, created_at, last_used_at, kind, program_id FROM api_keys
		  WHERE company_id = $1 AND revoked_at IS NULL AND ($2 = '' OR id < $2)
		  ORDER BY id DESC LIMIT $3`, companyID, p.Before, p.Limit+1)
	if err != nil {
		return nil, "", fmt.Errorf("list api keys: %w", err)
	}
	keys, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (APIKey, error) {
		var k APIKey
		err := r.Scan(&k.ID, &k.CompanyID, &k.Name, &k.Prefix, &k.CreatedAt, &k.LastUsedAt, &k.Kind, &k.ProgramID)
		return k, err
	})
	if err != nil {
		return nil, "", fmt.Errorf("list api keys: %w", err)
	}
	keys, next := page.Cut(keys, p.Limit, func(k APIKey) string { return k.ID })
	return keys, next, nil
}

// RevokeAPIKey revokes a key of the company and announces it to every api replica in the
// same transaction. It returns the key's hash (hex) so the caller can evict it locally, or
// ErrNotFound when the company has no such active key.
func (s *Store) RevokeAPIKey(ctx context.Context, companyID, keyID string) (string, error) {
	var hash []byte
	err := pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		err := tx.QueryRow(ctx,
			`UPDATE api_keys SET revoked_at = now() WHERE id = $1 AND company_id = $2 AND revoked_at IS NULL RETURNING hash`,
			keyID, companyID).Scan(&hash)
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `SELECT pg_notify($1, $2)`, auth.RevocationChannel, hex.EncodeToString(hash))
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return "", ErrNotFound
	}
	if err != nil {
		return "", fmt.Errorf("revoke api key: %w", err)
	}
	return hex.EncodeToString(hash), nil
}

// CompanyByID returns a company.
func (s *Store) CompanyByID(ctx context.Context, id string) (Company, error) {
	var c Company
	err := s.db.QueryRow(ctx, `SELECT id, kind, name, locale, created_at FROM companies WHERE id = $1`, id).
		Scan(&c.ID, &c.Kind, &c.Name, &c.Locale, &c.CreatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return Company{}, ErrNotFound
	}
	if err != nil {
		return Company{}, fmt.Errorf("company by id: %w", err)
	}
	return c, nil
}
