// Package signin turns a proven e-mail address (a magic code, or a verified address from
// Google or LinkedIn) into a dashboard session. A first sign-in registers the user together
// with a new company, whose kind and name the sign-up form provides.
package signin

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/partnerstream/partnerstream/internal/freetext"
	"github.com/partnerstream/partnerstream/internal/identity"
	"github.com/partnerstream/partnerstream/internal/oidclogin"
	"github.com/partnerstream/partnerstream/internal/session"
)

// Users is what sign-in needs from the identity store.
type Users interface {
	UserByEmail(ctx context.Context, email string) (identity.User, error)
	CompanyByID(ctx context.Context, id string) (identity.Company, error)
	CreateCompany(ctx context.Context, in identity.NewCompany) (identity.Company, identity.User, error)
	RecordLogin(ctx context.Context, userID string) error
}

// Invitations lets a first sign-in join the company that invited the address to its team
// (people.Service).
type Invitations interface {
	HasTeamInvitation(ctx context.Context, email string) (bool, error)
	AcceptTeamInvitation(ctx context.Context, email, name string) (identity.User, identity.Company, bool, error)
}

// Sessions issues dashboard sessions.
type Sessions interface {
	Issue(ctx context.Context, s session.Subject, meta session.Meta) (session.Tokens, error)
}

// Codes sends and checks magic codes.
type Codes interface {
	Request(ctx context.Context, email, ip, locale string) error
	Verify(ctx context.Context, email, code string, accept func(ctx context.Context, addr string) error) (string, error)
}

// OAuth runs the OpenID Connect flows.
type OAuth interface {
	Start(ctx context.Context, provider, returnTo string) (authURL, state string, err error)
	Callback(ctx context.Context, provider, state, code string) (oidclogin.Identity, string, error)
}

// Registration is what a first sign-in needs besides the address.
type Registration struct {
	CompanyKind string `json:"company_kind"`
	CompanyName string `json:"company_name"`
	Name        string `json:"name"`
	Locale      string `json:"locale"`
}

// Errors of sign-in.
var (
	// ErrRegistrationRequired: the address has no account and no registration was given.
	ErrRegistrationRequired = errors.New("no account for this address: sign up with a company kind and name")
	// ErrDisabled: the sign-in method is not configured.
	ErrDisabled = errors.New("this sign-in method is not configured")
)

// InvalidRegistration names the registration field that is wrong.
type InvalidRegistration struct{ Field, Message string }

func (e *InvalidRegistration) Error() string { return e.Field + ": " + e.Message }

// Result of a sign-in.
type Result struct {
	Tokens     session.Tokens
	User       identity.User
	Company    identity.Company
	Registered bool
}

// Service signs users in.
type Service struct {
	users    Users
	sessions Sessions
	codes    Codes // nil when e-mail is not configured
	oauth    OAuth // nil when no provider is configured
	invites  Invitations
}

// New returns the service; codes or oauth may be nil (that method is then disabled).
func New(users Users, sessions Sessions, codes Codes, oauth OAuth) *Service {
	return &Service{users: users, sessions: sessions, codes: codes, oauth: oauth}
}

// WithInvitations makes first sign-ins of invited addresses join the inviting company; it
// returns s.
func (s *Service) WithInvitations(inv Invitations) *Service {
	s.invites = inv
	return s
}

// RequestCode e-mails a sign-in code. It behaves the same for known and unknown addresses.
func (s *Service) RequestCode(ctx context.Context, email, ip, locale string) error {
	if s.codes == nil {
		return ErrDisabled
	}
	return s.codes.Request(ctx, email, ip, normalizeLocale(locale))
}

// SignInWithCode checks the code, then signs in (registering with reg when the address is
// new).
func (s *Service) SignInWithCode(ctx context.Context, email, code string, reg *Registration, meta session.Meta) (Result, error) {
	if s.codes == nil {
		return Result{}, ErrDisabled
	}
	if reg != nil {
		// Check the form before the code is spent on it.
		if err := reg.validate(); err != nil {
			return Result{}, err
		}
	}
	var accept func(context.Context, string) error
	if reg == nil {
		// Asking a new address for its registration must leave the code valid for the answer.
		accept = func(ctx context.Context, addr string) error {
			_, err := s.users.UserByEmail(ctx, addr)
			if errors.Is(err, identity.ErrNotFound) {
				if invited, ierr := s.invited(ctx, addr); ierr != nil || invited {
					return ierr
				}
				return ErrRegistrationRequired
			}
			return err
		}
	}
	addr, err := s.codes.Verify(ctx, email, code, accept)
	if err != nil {
		return Result{}, err
	}
	return s.signIn(ctx, addr, "", reg, meta)
}

// Sign-up details ride along the OAuth flow in the return path's query, so whichever api
// replica receives the callback can register the user.
const (
	qKind    = "ps_signup_kind"
	qCompany = "ps_signup_company"
	qLocale  = "ps_signup_locale"
)

// StartOAuth begins a provider's flow and returns the URL to send the browser to and the
// state to bind to it (the HTTP layer puts it in a cookie).
func (s *Service) StartOAuth(ctx context.Context, provider, returnTo string, reg *Registration) (string, string, error) {
	if s.oauth == nil {
		return "", "", ErrDisabled
	}
	if returnTo == "" {
		returnTo = "/"
	}
	if reg != nil {
		if err := reg.validate(); err != nil {
			return "", "", err
		}
		u, err := url.Parse(returnTo)
		if err != nil {
			return "", "", oidclogin.ErrInvalidReturnTo
		}
		q := u.Query()
		q.Set(qKind, reg.CompanyKind)
		q.Set(qCompany, reg.CompanyName)
		q.Set(qLocale, reg.Locale)
		u.RawQuery = q.Encode()
		returnTo = u.String()
	}
	return s.oauth.Start(ctx, provider, returnTo)
}

// FinishOAuth completes a provider's flow and signs in. It returns the path to send the
// browser back to.
func (s *Service) FinishOAuth(ctx context.Context, provider, state, code string, meta session.Meta) (Result, string, error) {
	if s.oauth == nil {
		return Result{}, "", ErrDisabled
	}
	id, returnTo, err := s.oauth.Callback(ctx, provider, state, code)
	if err != nil {
		return Result{}, "", err
	}
	reg, back := splitRegistration(returnTo)
	if reg != nil && reg.Name == "" {
		reg.Name = id.Name
	}
	if reg != nil && reg.Locale == "" {
		reg.Locale = normalizeLocale(id.Locale)
	}
	res, err := s.signIn(ctx, id.Email, id.Name, reg, meta)
	return res, back, err
}

func splitRegistration(returnTo string) (*Registration, string) {
	u, err := url.Parse(returnTo)
	if err != nil {
		return nil, "/"
	}
	q := u.Query()
	var reg *Registration
	if q.Get(qKind) != "" {
		reg = &Registration{CompanyKind: q.Get(qKind), CompanyName: q.Get(qCompany), Locale: q.Get(qLocale)}
	}
	q.Del(qKind)
	q.Del(qCompany)
	q.Del(qLocale)
	u.RawQuery = q.Encode()
	return reg, u.String()
}

func (s *Service) signIn(ctx context.Context, email, name string, reg *Registration, meta session.Meta) (Result, error) {
	res := Result{}
	u, err := s.users.UserByEmail(ctx, email)
	switch {
	case errors.Is(err, identity.ErrNotFound):
		// An invitation wins over a sign-up form: whoever was invited and signs up anyway
		// means to join, and an address belongs to one company only.
		if s.invites != nil {
			joined, co, ok, jerr := s.invites.AcceptTeamInvitation(ctx, email, name)
			if jerr != nil {
				return Result{}, fmt.Errorf("join invited team: %w", jerr)
			}
			if ok {
				u, res.Company, res.Registered = joined, co, true
				break
			}
		}
		if reg == nil {
			return Result{}, ErrRegistrationRequired
		}
		if err := reg.validate(); err != nil {
			return Result{}, err
		}
		if reg.Name == "" {
			reg.Name = name
		}
		var co identity.Company
		co, u, err = s.users.CreateCompany(ctx, identity.NewCompany{Kind: reg.CompanyKind, Name: reg.CompanyName, Locale: reg.Locale, OwnerEmail: email, OwnerName: reg.Name})
		if err != nil {
			// Two first sign-ins of one address at once: the other registered it.
			if again, lerr := s.users.UserByEmail(ctx, email); lerr == nil {
				u = again
			} else {
				return Result{}, fmt.Errorf("register %s: %w", reg.CompanyKind, err)
			}
		} else {
			res.Registered, res.Company = true, co
		}
	case err != nil:
		return Result{}, err
	}
	if !res.Registered {
		if res.Company, err = s.users.CompanyByID(ctx, u.CompanyID); err != nil {
			return Result{}, err
		}
	}
	if err := s.users.RecordLogin(ctx, u.ID); err != nil {
		return Result{}, err
	}
	res.User = u
	res.Tokens, err = s.sessions.Issue(ctx, session.Subject{UserID: u.ID, CompanyID: u.CompanyID, CompanyKind: res.Company.Kind, Role: u.Role, Locale: u.Locale}, meta)
	if err != nil {
		return Result{}, err
	}
	return res, nil
}

// invited reports whether the address has an open team invitation.
func (s *Service) invited(ctx context.Context, addr string) (bool, error) {
	if s.invites == nil {
		return false, nil
	}
	return s.invites.HasTeamInvitation(ctx, addr)
}

func (r *Registration) validate() error {
	r.CompanyName = strings.TrimSpace(r.CompanyName)
	r.Name = strings.TrimSpace(r.Name)
	r.Locale = normalizeLocale(r.Locale)
	switch {
	case r.CompanyKind != identity.Advertiser && r.CompanyKind != identity.Affiliate:
		return &InvalidRegistration{"company_kind", "must be advertiser or affiliate"}
	}
	if msg := freetext.Check(r.CompanyName, 1, 200, false); msg != "" {
		return &InvalidRegistration{"company_name", msg}
	}
	if msg := freetext.Check(r.Name, 0, 200, false); msg != "" {
		return &InvalidRegistration{"name", msg}
	}
	return nil
}

// normalizeLocale maps a language tag (es-MX, en_GB, "") to a supported locale.
func normalizeLocale(l string) string {
	if strings.HasPrefix(strings.ToLower(l), "es") {
		return "es"
	}
	return "en"
}
