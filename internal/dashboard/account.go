package dashboard

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/partnerstream/partnerstream/internal/identity"
)

// AccountStore saves a user's language; it is the service behind the api's
// PUT /api/account/locale (httpapi.AccountSettings).
type AccountStore struct{ db *pgxpool.Pool }

// NewAccountStore returns the store on the pool.
func NewAccountStore(db *pgxpool.Pool) *AccountStore { return &AccountStore{db: db} }

// SetUserLocale saves the user's locale; an unknown user is identity.ErrNotFound.
func (s *AccountStore) SetUserLocale(ctx context.Context, userID, locale string) error {
	if !supported(locale) {
		return fmt.Errorf("set locale %q: not one of %v", locale, Locales)
	}
	tag, err := s.db.Exec(ctx, `UPDATE users SET locale = $2 WHERE id = $1`, userID, locale)
	if err != nil {
		return fmt.Errorf("set locale: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return identity.ErrNotFound
	}
	return nil
}
