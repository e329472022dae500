package magiccode

import (
	"errors"
	"fmt"
	"net/mail"
	"strings"
)

// maxEmailLength is the longest address SMTP can carry (RFC 5321's 256-octet path less its
// angle brackets).
const maxEmailLength = 254

// NormalizeEmail returns the canonical form of a sign-in address (trimmed, lower-case), or an
// error wrapping ErrInvalidEmail. It accepts a bare address only: no display name, comment,
// quoted local part or IP-literal domain, and the domain must have a dot. One form per mailbox
// is what keeps the rate limits, the codes and the users table keyed alike.
//
// Lower-casing the local part is not what RFC 5321 promises, but it is what every mail
// provider users have does, and the users table is unique on lower(email) anyway.
func NormalizeEmail(s string) (string, error) {
	s = strings.ToLower(strings.TrimSpace(s))
	if err := checkEmail(s); err != nil {
		return "", fmt.Errorf("%w: %w", ErrInvalidEmail, err)
	}
	return s, nil
}

func checkEmail(s string) error {
	switch {
	case s == "":
		return errors.New("empty")
	case len(s) > maxEmailLength:
		return fmt.Errorf("longer than %d bytes", maxEmailLength)
	}
	a, err := mail.ParseAddress(s)
	if err != nil {
		return err
	}
	if a.Name != "" || a.Address != s {
		return errors.New("not a bare address")
	}
	at := strings.LastIndexByte(s, '@')
	local, domain := s[:at], s[at+1:]
	switch {
	case len(local) > 64:
		return errors.New("local part longer than 64 bytes")
	case strings.HasPrefix(domain, "["):
		return errors.New("IP-literal domain")
	case !strings.Contains(domain, "."):
		return errors.New("domain without a dot")
	}
	return nil
}
