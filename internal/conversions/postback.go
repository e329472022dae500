package conversions

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/partnerstream/partnerstream/internal/ids"
)

// A postback token is "pbt_", the 26-character body of its program's id, then 64 hex
// characters of secret (256 bits). The program id in it lets the check find the one stored
// hash to compare, in constant time, before anything else is looked at; only the SHA-256 of
// the whole token is stored.
const (
	tokenPrefix    = "pbt_"
	tokenIDLen     = 26
	tokenSecretLen = 64
)

// ErrInvalidToken: the postback token is malformed, unknown or was rotated away.
var ErrInvalidToken = errors.New("the postback token is not valid")

// RotatePostbackToken makes a new postback token for the advertiser's program, replacing the
// previous one at once, and returns it: it is not stored and cannot be shown again.
func (s *Service) RotatePostbackToken(ctx context.Context, advertiserID, programID string) (string, error) {
	if !ids.Valid(ids.Program, programID) {
		return "", ErrNotFound
	}
	secret := make([]byte, tokenSecretLen/2)
	if _, err := rand.Read(secret); err != nil {
		return "", fmt.Errorf("postback token: %w", err)
	}
	token := tokenPrefix + strings.TrimPrefix(programID, ids.Program+"_") + hex.EncodeToString(secret)
	hash := sha256.Sum256([]byte(token))
	tag, err := s.db.Exec(ctx, `INSERT INTO program_postback_tokens (program_id, token_hash, created_at)
		SELECT id, $3, $4 FROM programs WHERE id = $1 AND advertiser_id = $2
		ON CONFLICT (program_id) DO UPDATE SET token_hash = EXCLUDED.token_hash, created_at = EXCLUDED.created_at`,
		programID, advertiserID, hash[:], s.now())
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
	if len(token) != len(tokenPrefix)+tokenIDLen+tokenSecretLen || !strings.HasPrefix(token, tokenPrefix) {
		return "", "", ErrInvalidToken
	}
	programID = ids.Program + "_" + token[len(tokenPrefix):len(tokenPrefix)+tokenIDLen]
	if !ids.Valid(ids.Program, programID) {
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
	presented := sha256.Sum256([]byte(token))
	if subtle.ConstantTimeCompare(presented[:], stored) != 1 {
		return "", "", ErrInvalidToken
	}
	return programID, advertiserID, nil
}
