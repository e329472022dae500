// Package magiccode signs users in with a 6-digit code sent by e-mail.
//
// Request sends a code to any well-formed address, known or not, so that its answer never
// tells whether an account exists; Verify checks it and returns the normalised address, and the
// HTTP layer finds or registers the user behind it. Codes live in Postgres (table magic_codes),
// so every api replica sees the same codes, attempts and rate limits.
//
// Security properties:
//   - only HMAC-SHA256(pepper, email|code) is stored, with a pepper kept outside the database:
//     a database dump alone does not give the codes back, although 10^6 candidates would make
//     a plain hash trivial to reverse;
//   - a code expires (TTL), works once, and is locked after MaxAttempts wrong tries, after
//     which even the right code fails; counting is race-free (the row is locked while it is
//     checked);
//   - a new code replaces the previous one of the address;
//   - sending is rate limited per address and per client IP (IPv6: per /64) over sliding
//     windows counted in Postgres, serialised per address and per IP with advisory locks so
//     that concurrent requests cannot overshoot a limit.
//
// Store, then send: Request commits the code before it sends the e-mail, and revokes it when
// sending fails. The other order would either hold a database transaction (and two advisory
// locks) open across a slow or hanging SMTP conversation, starving the pool when the SMTP
// server is down, or mail a code that a failed insert then makes useless. A code whose e-mail
// failed is never usable: it is revoked, and even if revoking fails too, no one ever saw it.
// The failed request still counts against the rate limits, so an SMTP outage cannot be used to
// send more codes than the limits allow.
package magiccode

import (
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"math/big"
	"net/netip"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/partnerstream/partnerstream/internal/clientaddr"
	"github.com/partnerstream/partnerstream/internal/mailer"
)

// Errors of Request and Verify. Verify answers ErrInvalidCode for a wrong, unknown, used,
// replaced or expired code alike, so that a caller cannot tell those apart.
var (
	ErrInvalidEmail = errors.New("magiccode: invalid e-mail address")
	ErrInvalidCode  = errors.New("magiccode: invalid or expired code")
	ErrLocked       = errors.New("magiccode: too many wrong codes; request a new one")
)

// RateLimitError is Request's answer when the address or the client IP asked for too many
// codes; RetryAfter is how long until one more is allowed (round it up for a Retry-After
// header).
type RateLimitError struct {
	RetryAfter time.Duration
}

func (e *RateLimitError) Error() string {
	return fmt.Sprintf("magiccode: too many codes requested; retry in %v", e.RetryAfter.Round(time.Second))
}

// Limit allows Max codes per sliding Window.
type Limit struct {
	Max    int
	Window time.Duration
}

// MinPepperLength is the shortest pepper NewService accepts: 256 bits, the HMAC-SHA256 key size.
const MinPepperLength = 32

// Options tune a Service; zero values take the defaults.
type Options struct {
	// Pepper keys the HMAC of the stored codes. It is a secret of at least MinPepperLength
	// bytes, the same on every replica; changing it voids the codes in flight (nothing else).
	Pepper []byte
	// TTL is how long a code is valid; default 10 minutes.
	TTL time.Duration
	// MaxAttempts is the number of wrong tries that locks a code; default 5.
	MaxAttempts int
	// PerAddressLimit bounds the codes sent to one address; default 5 per 15 minutes.
	PerAddressLimit Limit
	// PerIPLimit bounds the codes one client IP (IPv6: /64) asks for; default 20 per 15 minutes.
	PerIPLimit Limit
	// Now is the clock; default time.Now.
	Now func() time.Time
	// ProductName is named in the e-mail; default "PartnerStream".
	ProductName string
}

// Defaults of Options.
const (
	DefaultTTL         = 10 * time.Minute
	DefaultMaxAttempts = 5
)

// Defaults of Options' limits.
var (
	DefaultPerAddressLimit = Limit{Max: 5, Window: 15 * time.Minute}
	DefaultPerIPLimit      = Limit{Max: 20, Window: 15 * time.Minute}
)

// Service issues and verifies codes.
type Service struct {
	db     *pgxpool.Pool
	mailer mailer.Mailer
	opts   Options
}

// NewService returns a Service storing codes in db (migrated) and sending them with m. It
// fails when the pepper is too short or an option is negative.
func NewService(db *pgxpool.Pool, m mailer.Mailer, opts Options) (*Service, error) {
	if len(opts.Pepper) < MinPepperLength {
		return nil, fmt.Errorf("magiccode: pepper is %d bytes, want at least %d random bytes", len(opts.Pepper), MinPepperLength)
	}
	if opts.TTL < 0 || opts.MaxAttempts < 0 || opts.PerAddressLimit.Max < 0 || opts.PerAddressLimit.Window < 0 ||
		opts.PerIPLimit.Max < 0 || opts.PerIPLimit.Window < 0 {
		return nil, errors.New("magiccode: TTL, attempts and limits must not be negative")
	}
	opts.Pepper = append([]byte(nil), opts.Pepper...)
	opts.TTL = cmp.Or(opts.TTL, DefaultTTL)
	opts.MaxAttempts = cmp.Or(opts.MaxAttempts, DefaultMaxAttempts)
	opts.PerAddressLimit.Max = cmp.Or(opts.PerAddressLimit.Max, DefaultPerAddressLimit.Max)
	opts.PerAddressLimit.Window = cmp.Or(opts.PerAddressLimit.Window, DefaultPerAddressLimit.Window)
	opts.PerIPLimit.Max = cmp.Or(opts.PerIPLimit.Max, DefaultPerIPLimit.Max)
	opts.PerIPLimit.Window = cmp.Or(opts.PerIPLimit.Window, DefaultPerIPLimit.Window)
	opts.ProductName = cmp.Or(opts.ProductName, "PartnerStream")
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Service{db: db, mailer: m, opts: opts}, nil
}

// Request sends a new code to email, asked for by the client at ip, in the language of locale
// (es or en). It replaces the address's previous code. Errors: ErrInvalidEmail (wrapped),
// *RateLimitError, or a failure of the database or of sending, which leaves no usable code.
func (s *Service) Request(ctx context.Context, email, ip, locale string) error {
	addr, err := NormalizeEmail(email)
	if err != nil {
		return err
	}
	client, err := ipKey(ip)
	if err != nil {
		return err
	}
	code, err := newCode()
	if err != nil {
		return err
	}
	id, err := s.store(ctx, addr, client, s.hash(addr, code))
	if err != nil {
		return err
	}
	if err := s.mailer.Send(ctx, message(s.opts.ProductName, addr, code, locale, s.opts.TTL)); err != nil {
		err = fmt.Errorf("magiccode: send the code: %w", err)
		if rerr := s.revoke(ctx, id); rerr != nil {
			return errors.Join(err, rerr)
		}
		return err
	}
	return nil
}

// store checks the rate limits and, within them, replaces the address's current code with a
// new one; it returns the new row's id.
func (s *Service) store(ctx context.Context, addr string, client netip.Prefix, hash []byte) (int64, error) {
	now := s.opts.Now()
	var id int64
	err := pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		scopes := []struct {
			column string
			value  any
			limit  Limit
		}{{"email", addr, s.opts.PerAddressLimit}, {"ip", client, s.opts.PerIPLimit}}
		// Serialise the requests of one address and of one IP, so that two of them cannot both
		// count one code below a limit. Always address first, then IP: a fixed order cannot
		// deadlock.
		for _, sc := range scopes {
			key := fmt.Sprintf("magic_codes %s %v", sc.column, sc.value)
			if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`, key); err != nil {
				return fmt.Errorf("lock the %s: %w", sc.column, err)
			}
		}
		var wait time.Duration
		for _, sc := range scopes {
			d, err := retryAfter(ctx, tx, sc.column, sc.value, sc.limit, now)
			if err != nil {
				return err
			}
			wait = max(wait, d)
		}
		if wait > 0 {
			return &RateLimitError{RetryAfter: wait}
		}
		if _, err := tx.Exec(ctx, `UPDATE magic_codes SET revoked_at = $2
			WHERE email = $1 AND consumed_at IS NULL AND revoked_at IS NULL`, addr, now); err != nil {
			return fmt.Errorf("revoke the previous code: %w", err)
		}
		return tx.QueryRow(ctx, `INSERT INTO magic_codes (email, code_hash, ip, created_at, expires_at)
			VALUES ($1, $2, $3, $4, $5) RETURNING id`,
			addr, hash, client, now, now.Add(s.opts.TTL)).Scan(&id)
	})
	var limited *RateLimitError
	switch {
	case errors.As(err, &limited):
		return 0, limited
	case err != nil:
		return 0, fmt.Errorf("magiccode: store the code: %w", err)
	}
	return id, nil
}

// retryAfter returns how long until the codes of the last window, by column = value, fall
// below the limit; 0 when they already are. The limit is reached when a Max-th newest code
// exists in the window, and it lifts as soon as that code leaves the window.
func retryAfter(ctx context.Context, tx pgx.Tx, column string, value any, l Limit, now time.Time) (time.Duration, error) {
	// column is one of two constants of this file, never input.
	q := `SELECT created_at FROM magic_codes WHERE ` + column + ` = $1 AND created_at > $2
		ORDER BY created_at DESC OFFSET $3 LIMIT 1`
	var created time.Time
	switch err := tx.QueryRow(ctx, q, value, now.Add(-l.Window), l.Max-1).Scan(&created); {
	case errors.Is(err, pgx.ErrNoRows):
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("count recent codes by %s: %w", column, err)
	}
	return created.Add(l.Window).Sub(now), nil
}

// revoke makes the code of a failed e-mail unusable. It runs even when ctx has ended (the
// client went away mid-send), within a bound of its own.
func (s *Service) revoke(ctx context.Context, id int64) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if _, err := s.db.Exec(ctx, `UPDATE magic_codes SET revoked_at = $2 WHERE id = $1 AND revoked_at IS NULL`,
		id, s.opts.Now()); err != nil {
		return fmt.Errorf("magiccode: revoke the code whose e-mail failed: %w", err)
	}
	return nil
}

// Verify checks code against the current code of email and, when it matches, consumes it and
// returns the normalised address. Errors: ErrInvalidCode (wrong, unknown, used, replaced or
// expired), ErrLocked (this or an earlier wrong try reached MaxAttempts), or a database
// failure.
//
// accept, when not nil, is asked about the address once the code matches, before it is
// consumed: its error is returned and leaves the code valid, so an answer that asks the user
// for more (a sign-up form) does not cost a code. It runs while the code is locked.
func (s *Service) Verify(ctx context.Context, email, code string, accept func(ctx context.Context, addr string) error) (string, error) {
	addr, err := NormalizeEmail(email)
	code = strings.TrimSpace(code)
	if err != nil || !wellFormed(code) {
		// A malformed code is no guess at the real one: it does not count as an attempt.
		return "", ErrInvalidCode
	}
	now := s.opts.Now()
	var outcome error
	err = pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		// FOR UPDATE makes concurrent tries on one code take turns, so each wrong one counts.
		var (
			id       int64
			stored   []byte
			attempts int
			expires  time.Time
			locked   *time.Time
		)
		err := tx.QueryRow(ctx, `SELECT id, code_hash, attempts, expires_at, locked_at FROM magic_codes
			WHERE email = $1 AND consumed_at IS NULL AND revoked_at IS NULL FOR UPDATE`, addr).
			Scan(&id, &stored, &attempts, &expires, &locked)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			outcome = ErrInvalidCode
			return nil
		case err != nil:
			return fmt.Errorf("read the code: %w", err)
		case locked != nil:
			outcome = ErrLocked
			return nil
		case !now.Before(expires):
			outcome = ErrInvalidCode
			return nil
		}
		if hmac.Equal(s.hash(addr, code), stored) {
			if accept != nil {
				if outcome = accept(ctx, addr); outcome != nil {
					return nil
				}
			}
			_, err := tx.Exec(ctx, `UPDATE magic_codes SET consumed_at = $2 WHERE id = $1`, id, now)
			if err != nil {
				return fmt.Errorf("consume the code: %w", err)
			}
			return nil
		}
		attempts++
		var lockedAt *time.Time
		outcome = ErrInvalidCode
		if attempts >= s.opts.MaxAttempts {
			lockedAt, outcome = &now, ErrLocked
		}
		if _, err := tx.Exec(ctx, `UPDATE magic_codes SET attempts = $2, locked_at = $3 WHERE id = $1`,
			id, attempts, lockedAt); err != nil {
			return fmt.Errorf("count the wrong code: %w", err)
		}
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("magiccode: verify: %w", err)
	}
	if outcome != nil {
		return "", outcome
	}
	return addr, nil
}

// Prune deletes the codes created more than olderThan ago, and returns how many. olderThan
// must cover the TTL and both rate-limit windows, whose counts those rows are.
func (s *Service) Prune(ctx context.Context, olderThan time.Duration) (int64, error) {
	if keep := s.keep(); olderThan < keep {
		return 0, fmt.Errorf("magiccode: prune codes older than %v: rows younger than %v still count for the TTL or a rate limit", olderThan, keep)
	}
	tag, err := s.db.Exec(ctx, `DELETE FROM magic_codes WHERE created_at < $1`, s.opts.Now().Add(-olderThan))
	if err != nil {
		return 0, fmt.Errorf("magiccode: prune: %w", err)
	}
	return tag.RowsAffected(), nil
}

// keep is how long a row matters: the longest of the TTL and the limit windows.
func (s *Service) keep() time.Duration {
	return max(s.opts.TTL, s.opts.PerAddressLimit.Window, s.opts.PerIPLimit.Window)
}

// hash is HMAC-SHA256(pepper, email|code). The code is always 6 digits at the end, so the
// input is unambiguous even though an address may contain "|".
func (s *Service) hash(addr, code string) []byte {
	h := hmac.New(sha256.New, s.opts.Pepper)
	h.Write([]byte(addr + "|" + code))
	return h.Sum(nil)
}

const codeDigits = 6

var codeSpace = big.NewInt(1_000_000) // 10^codeDigits

// newCode draws a code uniformly from 000000-999999: rand.Int rejects the draws that a modulo
// would bias.
func newCode() (string, error) {
	n, err := rand.Int(rand.Reader, codeSpace)
	if err != nil {
		return "", fmt.Errorf("magiccode: draw a code: %w", err)
	}
	return fmt.Sprintf("%0*d", codeDigits, n), nil
}

func wellFormed(code string) bool {
	if len(code) != codeDigits {
		return false
	}
	for _, c := range []byte(code) {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// ipKey is what the per-IP limit counts (clientaddr.Subscriber: an IPv6 client's /64).
func ipKey(ip string) (netip.Prefix, error) {
	a, err := netip.ParseAddr(ip)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("magiccode: client IP %q: %w", ip, err)
	}
	return clientaddr.Subscriber(a), nil
}
