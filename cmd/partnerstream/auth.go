package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/partnerstream/partnerstream/internal/config"
	"github.com/partnerstream/partnerstream/internal/identity"
	"github.com/partnerstream/partnerstream/internal/keyring"
	"github.com/partnerstream/partnerstream/internal/magiccode"
	"github.com/partnerstream/partnerstream/internal/mailer"
	"github.com/partnerstream/partnerstream/internal/oidclogin"
	"github.com/partnerstream/partnerstream/internal/people"
	"github.com/partnerstream/partnerstream/internal/session"
	"github.com/partnerstream/partnerstream/internal/signin"
)

// authSettings are the sign-in settings of the api (and dev).
type authSettings struct {
	session config.Session
	smtp    config.SMTP
	oauth   config.OAuth
}

func (a *authSettings) groups() []config.Group {
	return []config.Group{sessionKeysChecked(&a.session), &a.smtp, &a.oauth}
}

func sessionKeysChecked(s *config.Session) config.Group {
	return keysChecked{Group: s, flag: "session-keys", spec: &s.Keys, parse: func(spec string) error {
		_, err := session.ParseKeys(spec)
		return err
	}}
}

// keysChecked parses a key ring setting while settings are read, so a bad key stops start-up
// before any store is opened. An empty ring is the group's own Validate's business.
type keysChecked struct {
	config.Group
	flag  string
	spec  *string
	parse func(string) error
	// required refuses an empty ring here, for a group that lets it be empty (dev makes its
	// own keys where the api must be given them).
	required bool
}

func (k keysChecked) Validate() error {
	if err := k.Group.Validate(); err != nil {
		return err
	}
	if *k.spec == "" {
		if k.required {
			return config.Missing(k.flag)
		}
		return nil
	}
	if err := k.parse(*k.spec); err != nil {
		return config.Invalid(k.flag, err)
	}
	return nil
}

// authDeps are the built sign-in services.
type authDeps struct {
	sessions *session.Manager
	signin   *signin.Service
	users    *identity.Store
	codes    *magiccode.Service // nil without e-mail
	people   *people.Service
	mailer   mailer.Mailer // nil without a relay
}

// prune deletes expired sessions and sign-in codes.
func (d *authDeps) prune(ctx context.Context) error {
	if _, err := d.sessions.DeleteExpired(ctx); err != nil {
		return err
	}
	if d.codes != nil {
		if _, err := d.codes.Prune(ctx, 24*time.Hour); err != nil {
			return err
		}
	}
	return nil
}

// noRelay is what newAuth does about sign-in codes when no SMTP relay is configured.
type noRelay int

const (
	relayMissing noRelay = iota // e-mail sign-in is off, and the log says so (api)
	relayLog                    // codes go to the log (dev)
	relayUnused                 // the command signs nobody in (seed): nothing to say
)

// newAuth builds sessions, magic codes and social sign-in.
func newAuth(ctx context.Context, p *platform, a *authSettings, baseURL string, without noRelay) (*authDeps, error) {
	keys, err := session.ParseKeys(a.session.Keys)
	if err != nil {
		return nil, config.Invalid("session-keys", err)
	}
	sessions := session.NewManager(p.pg, keys, session.Options{AccessTTL: a.session.AccessTTL, RefreshTTL: a.session.RefreshTTL, InsecureCookies: a.session.InsecureCookies})
	users := identity.NewStore(p.pg)

	deps := &authDeps{sessions: sessions, users: users}
	var codes signin.Codes
	var m mailer.Mailer
	switch {
	case a.smtp.Host != "":
		if m, err = mailer.NewSMTP(mailer.SMTPConfig{Host: a.smtp.Host, Port: a.smtp.Port, TLS: a.smtp.TLS, Username: a.smtp.Username, Password: a.smtp.Password, From: a.smtp.From}); err != nil {
			return nil, config.Invalid("smtp-host", err)
		}
	case without == relayLog:
		m = mailer.NewLog(p.componentLog("mail"))
	case without == relayMissing:
		p.log.Warn("no --smtp-host: e-mail sign-in codes are disabled")
	}
	deps.mailer = m
	if m != nil {
		svc, err := magiccode.NewService(p.pg, m, magiccode.Options{Pepper: keys.Derive("magic-code-pepper")})
		if err != nil {
			return nil, fmt.Errorf("magic codes: %w", err)
		}
		codes, deps.codes = svc, svc
	}

	var providers []oidclogin.ProviderConfig
	for _, pc := range []oidclogin.ProviderConfig{
		{Name: "google", Issuer: a.oauth.GoogleIssuer, ClientID: a.oauth.GoogleClientID, ClientSecret: a.oauth.GoogleClientSecret},
		{Name: "linkedin", Issuer: a.oauth.LinkedInIssuer, ClientID: a.oauth.LinkedInClientID, ClientSecret: a.oauth.LinkedInClientSecret},
	} {
		if pc.ClientID != "" {
			pc.RedirectURL = baseURL + "/api/auth/oauth/" + pc.Name + "/callback"
			providers = append(providers, pc)
		}
	}
	var oauth signin.OAuth
	if len(providers) > 0 {
		svc, err := oidclogin.New(ctx, p.pg, providers, oidclogin.Options{})
		if err != nil {
			return nil, fmt.Errorf("oauth: %w", err)
		}
		oauth = svc
	}
	// Without a mail relay invitations are still made; the invitee signs in (OAuth) to accept.
	deps.people = people.NewService(p.pg, m, people.Options{BaseURL: baseURL})
	deps.signin = signin.New(users, sessions, codes, oauth).WithInvitations(deps.people)
	return deps, nil
}

// devKeys returns the key ring kept in file name of the dev state directory, made on first
// use, so browser sessions, demo tokens and click ids survive a restart of `partnerstream dev`.
func devKeys(dir, name string) (string, error) {
	path := filepath.Join(dir, name)
	if b, err := os.ReadFile(path); err == nil {
		return strings.TrimSpace(string(b)), nil
	}
	spec := keyring.GenerateSpec()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("dev %s: %w", name, err)
	}
	if err := os.WriteFile(path, []byte(spec+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("dev %s: %w", name, err)
	}
	return spec, nil
}
