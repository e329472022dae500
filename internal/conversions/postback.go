package conversions

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/partnerstream/partnerstream/internal/ids"
	"github.com/partnerstream/partnerstream/internal/programtoken"
)

// tokenPrefix starts a postback token (package programtoken says the rest).
const tokenPrefix = "pbt_"

// ErrInvalidToken: the postback token is malformed, unknown or was rotated away.
var ErrInvalidToken = errors.New("the postback token is not valid")

// RotatePostbackToken makes a new postback token for the advertiser's program, replacing the
// previous one at once, and returns it: it is not stored and cannot be shown again.
func (s *Service) RotatePostbackToken(ctx context.Context, advertiserID, programID string) (string, error) {
	if !ids.Valid(ids.Program, programID) {
		return "", ErrNotFound
	}
	token, hash, err := programtoken.New(tokenPrefix, programID)
	if err != nil {
		return "", err
	}
	tag, err := s.db.Exec(ctx, `INSERT INTO program_postback_tokens (program_id, token_hash, created_at)
		SELECT id, $3, $4 FROM programs WHERE id = $1 AND advertiser_id = $2
		ON CONFLICT (program_id) DO UPDATE SET token_hash = EXCLUDED.token_hash, created_at = EXCLUDED.created_at`,
		programID, advertiserID, hash, s.now())
	if err != nil {
		return "", fmt.Errorf("store postback token of %s: %w", programID, err)
	}
	if tag.RowsAffected() == 0 {
		return "", ErrNotFound
	}
	return token, nil
}

// RegisterPostback registers a conversion reported through the server-to-server postback URL:
// the token stands for the advertiser, and only clicks of the token's program count. admit,
// when not nil, is asked about the token's program once the token is found valid and before
// anything is registered (the api's per-token rate limit); its error is returned as it is.
func (s *Service) RegisterPostback(ctx context.Context, token string, in NewConversion, admit func(programID string) error) (Conversion, bool, error) {
	programID, advertiserID, err := s.checkToken(ctx, token)
	if err != nil {
		return Conversion{}, false, err
	}
	if admit != nil {
		if err := admit(programID); err != nil {
			return Conversion{}, false, err
		}
	}
	in.ProgramID, in.Source = programID, SourcePostback
	return s.Register(ctx, advertiserID, in)
}

// checkToken returns the program and advertiser of a valid token.
func (s *Service) checkToken(ctx context.Context, token string) (programID, advertiserID string, err error) {
	programID, ok := programtoken.Program(tokenPrefix, token)
	if !ok {
		return "", "", ErrInvalidToken
	}
	var stored []byte
	err = s.db.QueryRow(ctx, `SELECT t.token_hash, p.advertiser_id FROM program_postback_tokens t
		JOIN programs p ON p.id = t.program_id WHERE t.program_id = $1`, programID).Scan(&stored, &advertiserID)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", "", ErrInvalidToken
	}
	if err != nil {
		return "", "", fmt.Errorf("read postback token of %s: %w", programID, err)
	}
	if !programtoken.Matches(token, stored) {
		return "", "", ErrInvalidToken
	}
	return programID, advertiserID, nil
}
