package session

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// errNotFound: no session matches. The Manager turns it into ErrInvalidToken.
var errNotFound = errors.New("session not found")

// store keeps the sessions table. The Manager makes every decision (expired, revoked, reused);
// the store only reads and writes rows, each write in one statement.
type store interface {
	create(ctx context.Context, r record) error
	// state is the hot path of every authenticated request: one primary-key lookup.
	state(ctx context.Context, id string) (state, error)
	// byRefreshHash finds the session whose current or retired refresh token has this hash.
	byRefreshHash(ctx context.Context, hash []byte) (refreshRow, error)
	// rotate replaces the refresh hash old by next and retires old, only if old is still the
	// current one of the session (errNotFound otherwise: a concurrent refresh won).
	rotate(ctx context.Context, id string, old, next []byte, now time.Time) error
	revoke(ctx context.Context, id string, now time.Time) error
	revokeUser(ctx context.Context, userID string, now time.Time) error
	deleteExpired(ctx context.Context, now time.Time) (int64, error)
}

// record is a new session row.
type record struct {
	ID, UserID, CompanyID string
	Hash                  []byte
	CreatedAt, ExpiresAt  time.Time
	UserAgent, IP         string
}

// state is what decides whether a session may still be used.
type state struct {
	UserID    string
	ExpiresAt time.Time
	RevokedAt *time.Time
}

// live is the one place that says whether a session may still be used.
func (s state) live(now time.Time) error {
	switch {
	case s.RevokedAt != nil:
		return ErrRevoked
	case !now.Before(s.ExpiresAt):
		return fmt.Errorf("%w: the session ended at %s", ErrExpired, s.ExpiresAt.UTC().Format(time.RFC3339))
	}
	return nil
}

// refreshRow is a session found by a refresh token, with the user's current subject.
type refreshRow struct {
	state
	ID      string
	Subject Subject
	// RetiredAt is set when the token is an old one of the session.
	RetiredAt *time.Time
}

type pgStore struct{ db *pgxpool.Pool }

func (s pgStore) create(ctx context.Context, r record) error {
	_, err := s.db.Exec(ctx, `
		INSERT INTO sessions (id, user_id, company_id, refresh_hash, created_at, expires_at, last_used_at, user_agent, ip)
		VALUES ($1, $2, $3, $4, $5, $6, $5, $7, $8)`,
		r.ID, r.UserID, r.CompanyID, r.Hash, r.CreatedAt, r.ExpiresAt, r.UserAgent, r.IP)
	if err != nil {
		return fmt.Errorf("insert session: %w", err)
	}
	return nil
}

func (s pgStore) state(ctx context.Context, id string) (state, error) {
	var st state
	err := s.db.QueryRow(ctx, `SELECT user_id, expires_at, revoked_at FROM sessions WHERE id = $1`, id).
		Scan(&st.UserID, &st.ExpiresAt, &st.RevokedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return state{}, errNotFound
	}
	if err != nil {
		return state{}, fmt.Errorf("select session: %w", err)
	}
	return st, nil
}

// byRefreshHash reads the role, locale and company kind from users and companies rather than
// from the session, so that a refreshed token reflects changes made since sign-in.
func (s pgStore) byRefreshHash(ctx context.Context, hash []byte) (refreshRow, error) {
	var r refreshRow
	err := s.db.QueryRow(ctx, `
		WITH hit AS (
			SELECT id AS session_id, NULL::timestamptz AS retired_at FROM sessions WHERE refresh_hash = $1
			UNION ALL
			SELECT session_id, retired_at FROM retired_refresh_tokens WHERE hash = $1
		)
		SELECT s.id, s.user_id, s.company_id, c.kind, u.role, u.locale, s.expires_at, s.revoked_at, hit.retired_at
		  FROM hit
		  JOIN sessions s ON s.id = hit.session_id
		  JOIN users u ON u.id = s.user_id
		  JOIN companies c ON c.id = s.company_id`, hash).
		Scan(&r.ID, &r.Subject.UserID, &r.Subject.CompanyID, &r.Subject.CompanyKind, &r.Subject.Role, &r.Subject.Locale,
			&r.ExpiresAt, &r.RevokedAt, &r.RetiredAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return refreshRow{}, errNotFound
	}
	if err != nil {
		return refreshRow{}, fmt.Errorf("select session by refresh token: %w", err)
	}
	r.UserID = r.Subject.UserID
	return r, nil
}

// rotate is one statement, so the swap and the retirement commit together. Under READ COMMITTED
// a concurrent rotate of the same token waits for the row lock, then sees the new hash and
// updates nothing.
func (s pgStore) rotate(ctx context.Context, id string, old, next []byte, now time.Time) error {
	tag, err := s.db.Exec(ctx, `
		WITH rotated AS (
			UPDATE sessions SET refresh_hash = $3, last_used_at = $4
			 WHERE id = $1 AND refresh_hash = $2 AND revoked_at IS NULL
			RETURNING id
		)
		INSERT INTO retired_refresh_tokens (hash, session_id, retired_at)
		SELECT $2, id, $4 FROM rotated`, id, old, next, now)
	if err != nil {
		return fmt.Errorf("rotate refresh token: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return errNotFound
	}
	return nil
}

func (s pgStore) revoke(ctx context.Context, id string, now time.Time) error {
	if _, err := s.db.Exec(ctx, `UPDATE sessions SET revoked_at = $2 WHERE id = $1 AND revoked_at IS NULL`, id, now); err != nil {
		return fmt.Errorf("update session: %w", err)
	}
	return nil
}

func (s pgStore) revokeUser(ctx context.Context, userID string, now time.Time) error {
	if _, err := s.db.Exec(ctx, `UPDATE sessions SET revoked_at = $2 WHERE user_id = $1 AND revoked_at IS NULL`, userID, now); err != nil {
		return fmt.Errorf("update sessions: %w", err)
	}
	return nil
}

func (s pgStore) deleteExpired(ctx context.Context, now time.Time) (int64, error) {
	tag, err := s.db.Exec(ctx, `DELETE FROM sessions WHERE expires_at <= $1`, now)
	if err != nil {
		return 0, fmt.Errorf("delete sessions: %w", err)
	}
	return tag.RowsAffected(), nil
}
