// Package idempotency remembers the responses of creating POSTs by Idempotency-Key, so a
// client that retries after a timeout gets the first response instead of a second object.
// Rules: same key and same request -> the stored response; same key and another request ->
// ErrMismatch (422); same key while the first is still running -> ErrInFlight (409). Keys
// are scoped to the caller (API key or user) and kept for a day.
package idempotency

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// TTL is how long a key is remembered.
const TTL = 24 * time.Hour

var (
	// ErrMismatch: the key was used with another request.
	ErrMismatch = errors.New("idempotency key already used with a different request")
	// ErrInFlight: the first request with this key has not finished.
	ErrInFlight = errors.New("a request with this idempotency key is still in progress")
)

// Response is a stored response.
type Response struct {
	Status      int
	ContentType string
	Body        []byte
}

// Request identifies what was sent under a key.
type Request struct {
	Principal, Key, Method, Path string
	Body                         []byte
}

func (r Request) hash() []byte {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00", r.Method, r.Path)
	h.Write(r.Body)
	return h.Sum(nil)
}

// Store keeps keys in Postgres.
type Store struct {
	db  *pgxpool.Pool
	now func() time.Time
}

// NewStore returns a store; now may be nil.
func NewStore(db *pgxpool.Pool, now func() time.Time) *Store {
	if now == nil {
		now = time.Now
	}
	return &Store{db: db, now: now}
}

// Begin claims the key for this request. It returns (nil, nil) when the caller owns the key
// and must run the request then call Complete or Abandon; a stored Response to replay; or
// ErrMismatch / ErrInFlight.
func (s *Store) Begin(ctx context.Context, r Request) (*Response, error) {
	hash := r.hash()
	now := s.now()
	// An expired claim is removed first so that the key can be claimed anew.
	if _, err := s.db.Exec(ctx, `DELETE FROM idempotency_keys WHERE principal = $1 AND key = $2 AND created_at < $3`,
		r.Principal, r.Key, now.Add(-TTL)); err != nil {
		return nil, fmt.Errorf("idempotency: expire: %w", err)
	}
	tag, err := s.db.Exec(ctx,
		`INSERT INTO idempotency_keys (principal, key, method, path, request_hash, created_at)
		 VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING`,
		r.Principal, r.Key, r.Method, r.Path, hash, now)
	if err != nil {
		return nil, fmt.Errorf("idempotency: claim: %w", err)
	}
	if tag.RowsAffected() == 1 {
		return nil, nil
	}
	var (
		stored      []byte
		status      *int
		contentType *string
		body        []byte
	)
	err = s.db.QueryRow(ctx,
		`SELECT request_hash, status, content_type, body FROM idempotency_keys WHERE principal = $1 AND key = $2`,
		r.Principal, r.Key).Scan(&stored, &status, &contentType, &body)
	if errors.Is(err, pgx.ErrNoRows) {
		// The owner abandoned it between our insert and select: let the client retry.
		return nil, ErrInFlight
	}
	if err != nil {
		return nil, fmt.Errorf("idempotency: read: %w", err)
	}
	if string(stored) != string(hash) {
		return nil, ErrMismatch
	}
	if status == nil {
		return nil, ErrInFlight
	}
	resp := &Response{Status: *status, Body: body}
	if contentType != nil {
		resp.ContentType = *contentType
	}
	return resp, nil
}

// Complete stores the response of a claimed key.
func (s *Store) Complete(ctx context.Context, r Request, resp Response) error {
	_, err := s.db.Exec(ctx,
		`UPDATE idempotency_keys SET status = $3, content_type = $4, body = $5 WHERE principal = $1 AND key = $2`,
		r.Principal, r.Key, resp.Status, resp.ContentType, resp.Body)
	if err != nil {
		return fmt.Errorf("idempotency: complete: %w", err)
	}
	return nil
}

// Abandon releases a claimed key (the request failed in a way worth retrying).
func (s *Store) Abandon(ctx context.Context, r Request) error {
	_, err := s.db.Exec(ctx, `DELETE FROM idempotency_keys WHERE principal = $1 AND key = $2 AND status IS NULL`, r.Principal, r.Key)
	if err != nil {
		return fmt.Errorf("idempotency: abandon: %w", err)
	}
	return nil
}

// Prune deletes keys older than the TTL.
func (s *Store) Prune(ctx context.Context) (int64, error) {
	tag, err := s.db.Exec(ctx, `DELETE FROM idempotency_keys WHERE created_at < $1`, s.now().Add(-TTL))
	if err != nil {
		return 0, fmt.Errorf("idempotency: prune: %w", err)
	}
	return tag.RowsAffected(), nil
}
