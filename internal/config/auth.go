package config

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/pflag"
)

// Session is how dashboard sessions are signed and how long they last.
type Session struct {
	Keys       string
	AccessTTL  time.Duration
	RefreshTTL time.Duration
	// InsecureCookies drops the Secure cookie attribute (dev over plain http).
	InsecureCookies bool
	// Optional leaves Keys empty without error (dev generates them).
	Optional bool
	// DevDefaults makes cookies insecure by default (dev serves plain http).
	DevDefaults bool
}

func (s *Session) Register(fs *pflag.FlagSet) {
	fs.StringVar(&s.Keys, "session-keys", "", "session signing keys kid:base64(>=32 bytes), comma-separated; the first signs, all verify (see docs/auth.md, section Signing in, for rotation)")
	fs.DurationVar(&s.AccessTTL, "session-access-ttl", 15*time.Minute, "lifetime of a dashboard access token")
	fs.DurationVar(&s.RefreshTTL, "session-refresh-ttl", 30*24*time.Hour, "absolute lifetime of a dashboard session (refresh tokens)")
	fs.BoolVar(&s.InsecureCookies, "session-insecure-cookies", s.DevDefaults, "drop the Secure attribute of session cookies (plain-http development only)")
}

func (s *Session) Validate() error {
	if s.Keys == "" && !s.Optional {
		return Missing("session-keys")
	}
	if s.AccessTTL < time.Minute || s.AccessTTL > 24*time.Hour {
		return Invalid("session-access-ttl", errors.New("must be between 1m and 24h"))
	}
	if s.RefreshTTL < s.AccessTTL || s.RefreshTTL > 365*24*time.Hour {
		return Invalid("session-refresh-ttl", errors.New("must be at least the access TTL and at most 8760h"))
	}
	return nil
}

// SMTP is the mail relay for sign-in codes.
type SMTP struct {
	Host, TLS, Username, Password, From string
	Port                                int
}

func (s *SMTP) Register(fs *pflag.FlagSet) {
	fs.StringVar(&s.Host, "smtp-host", "", "SMTP relay host for sign-in codes; empty disables e-mail (dev logs the codes instead)")
	fs.IntVar(&s.Port, "smtp-port", 0, "SMTP port (default by TLS mode: 25 none, 587 starttls, 465 tls)")
	fs.StringVar(&s.TLS, "smtp-tls", "starttls", "SMTP TLS mode: none, starttls or tls")
	fs.StringVar(&s.Username, "smtp-username", "", "SMTP user name")
	fs.StringVar(&s.Password, "smtp-password", "", "SMTP password")
	fs.StringVar(&s.From, "smtp-from", "PartnerStream <no-reply@partnerstream.local>", "sender of the platform's e-mails")
}

func (s *SMTP) Validate() error {
	switch s.TLS {
	case "none", "starttls", "tls":
	default:
		return Invalid("smtp-tls", fmt.Errorf("%q is not one of none, starttls, tls", s.TLS))
	}
	if s.Port < 0 || s.Port > 65535 {
		return Invalid("smtp-port", errors.New("must be a TCP port"))
	}
	return nil
}

// OAuth configures social sign-in; a provider is on when its client id is set.
type OAuth struct {
	GoogleIssuer, GoogleClientID, GoogleClientSecret       string
	LinkedInIssuer, LinkedInClientID, LinkedInClientSecret string
}

// Providers lists the sign-in providers that are configured, as the routes name them.
func (o *OAuth) Providers() []string {
	var names []string
	if o.GoogleClientID != "" {
		names = append(names, "google")
	}
	if o.LinkedInClientID != "" {
		names = append(names, "linkedin")
	}
	return names
}

func (o *OAuth) Register(fs *pflag.FlagSet) {
	fs.StringVar(&o.GoogleIssuer, "oauth-google-issuer", "https://accounts.google.com", "OpenID Connect issuer of Google sign-in")
	fs.StringVar(&o.GoogleClientID, "oauth-google-client-id", "", "Google OAuth client id; empty disables Google sign-in")
	fs.StringVar(&o.GoogleClientSecret, "oauth-google-client-secret", "", "Google OAuth client secret")
	fs.StringVar(&o.LinkedInIssuer, "oauth-linkedin-issuer", "https://www.linkedin.com/oauth", "OpenID Connect issuer of LinkedIn sign-in")
	fs.StringVar(&o.LinkedInClientID, "oauth-linkedin-client-id", "", "LinkedIn OAuth client id; empty disables LinkedIn sign-in")
	fs.StringVar(&o.LinkedInClientSecret, "oauth-linkedin-client-secret", "", "LinkedIn OAuth client secret")
}

func (o *OAuth) Validate() error {
	if o.GoogleClientID != "" && o.GoogleClientSecret == "" {
		return Missing("oauth-google-client-secret")
	}
	if o.LinkedInClientID != "" && o.LinkedInClientSecret == "" {
		return Missing("oauth-linkedin-client-secret")
	}
	return nil
}
