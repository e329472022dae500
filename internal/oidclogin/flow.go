package oidclogin

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// flow is a login in progress, stored under the hash of its state.
type flow struct {
	provider, nonce, verifier, returnTo string
}

// saveFlow stores a new flow, and prunes the expired ones so the table holds only the logins
// of the last StateTTL.
func (s *Service) saveFlow(ctx context.Context, state string, f flow) error {
	now := s.now()
	if _, err := s.db.Exec(ctx, `DELETE FROM oauth_states WHERE expires_at <= $1`, now); err != nil {
		return fmt.Errorf("oidclogin: prune expired states: %w", err)
	}
	_, err := s.db.Exec(ctx, `
		INSERT INTO oauth_states (state_hash, provider, nonce, code_verifier, return_to, created_at, expires_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7)`,
		stateHash(state), f.provider, f.nonce, f.verifier, f.returnTo, now, now.Add(s.stateTTL))
	if err != nil {
		return fmt.Errorf("oidclogin: save state: %w", err)
	}
	return nil
}

// consumeFlow marks the flow of state as used and returns it, in one statement: of two
// callbacks racing with the same state, on one replica or two, only one gets the flow.
func (s *Service) consumeFlow(ctx context.Context, provider, state string) (flow, error) {
	f := flow{provider: provider}
	if state == "" {
		return flow{}, fmt.Errorf("%w: no state in the callback", ErrInvalidState)
	}
	err := s.db.QueryRow(ctx, `
		UPDATE oauth_states SET consumed_at = $3
		WHERE state_hash = $1 AND provider = $2 AND consumed_at IS NULL AND expires_at > $3
		RETURNING nonce, code_verifier, return_to`,
		stateHash(state), provider, s.now()).Scan(&f.nonce, &f.verifier, &f.returnTo)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return flow{}, ErrInvalidState
	case err != nil:
		return flow{}, fmt.Errorf("oidclogin: consume state: %w", err)
	}
	return f, nil
}

func stateHash(state string) []byte {
	sum := sha256.Sum256([]byte(state))
	return sum[:]
}
