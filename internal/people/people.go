// Package people owns who works in a company and who is invited to it, in Postgres: the
// team (users with a role: owner, admin, member), invitations to join a team, and a brand's
// invitations of affiliates to one of its programs.
//
// Invitations carry no secret. The invitee proves the address by signing in with it (a
// magic code or a verified OAuth address); a team invitation is accepted by the first
// sign-in of its address, an affiliate invitation by the affiliate in the dashboard. So
// nothing stored here lets the reader of a dump accept one, and the e-mail only says where
// to sign in. An invitation is open until accepted (once) or revoked; an open one past its
// expiry is listed as expired and refused.
//
// Rules (docs/dashboard.md, "People"): owners and admins invite, change roles, remove
// members and revoke invitations; only owners grant or take away the owner role; a company
// always keeps one owner; members read. A foreign id is ErrNotFound, so ids of other
// companies leak nothing.
package people

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/partnerstream/partnerstream/internal/ids"
	"github.com/partnerstream/partnerstream/internal/magiccode"
	"github.com/partnerstream/partnerstream/internal/mailer"
)

// Roles of a company's users.
const (
	Owner      = "owner"
	Admin      = "admin"
	RoleMember = "member"
)

// Statuses of an open invitation, as listed.
const (
	Pending = "pending"
	Expired = "expired"
)

// DefaultTTL is how long an invitation may be accepted.
const DefaultTTL = 7 * 24 * time.Hour

// Actor is the signed-in caller.
type Actor struct {
	UserID, CompanyID string
	Kind              string // identity.Advertiser or identity.Affiliate
	Role              string
	Locale            string
}

func (a Actor) canManage() bool { return a.Role == Owner || a.Role == Admin }

// Errors of the service; the HTTP layer maps them to problems.
var (
	ErrNotFound = errors.New("not found")
	// ErrMailNotSent: the invitation is saved, its e-mail failed; inviting again resends it.
	ErrMailNotSent = errors.New("the invitation is saved but its e-mail could not be sent; invite again to resend it")
)

// NotFoundError is a record that does not exist or that the caller may not see.
type NotFoundError struct{ What string }

func (e *NotFoundError) Error() string        { return "no such " + e.What }
func (e *NotFoundError) Is(target error) bool { return target == ErrNotFound }

// ForbiddenError is an action the caller's role or company kind does not allow.
type ForbiddenError struct{ Reason string }

func (e *ForbiddenError) Error() string { return e.Reason }

// ConflictError is an action the current state refuses; Code is stable for clients.
type ConflictError struct{ Code, Reason string }

func (e *ConflictError) Error() string { return e.Reason }

// FieldError is one invalid input field.
type FieldError struct{ Field, Message string }

func (e *FieldError) Error() string { return e.Field + ": " + e.Message }

// Options of the service.
type Options struct {
	// TTL of invitations; DefaultTTL when zero.
	TTL time.Duration
	// BaseURL is the dashboard's address named in the e-mails (no trailing slash); empty
	// leaves the link out.
	BaseURL string
	// ProductName is named in the e-mails; "PartnerStream" when empty.
	ProductName string
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// Service is the people domain.
type Service struct {
	db   *pgxpool.Pool
	mail mailer.Mailer // nil: invitations are saved and not e-mailed
	o    Options
}

// NewService returns the service on db; m sends the invitations (nil sends none).
func NewService(db *pgxpool.Pool, m mailer.Mailer, o Options) *Service {
	if o.TTL <= 0 {
		o.TTL = DefaultTTL
	}
	if o.ProductName == "" {
		o.ProductName = "PartnerStream"
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Service{db: db, mail: m, o: o}
}

func (s *Service) now() time.Time { return s.o.Now().UTC() }

// normalizeEmail is the address as users and invitations store it, or a FieldError.
func normalizeEmail(email string) (string, error) {
	addr, err := magiccode.NormalizeEmail(email)
	if err != nil {
		return "", &FieldError{Field: "email", Message: "must be an e-mail address"}
	}
	return addr, nil
}

// send e-mails an invitation; a failure is ErrMailNotSent (the invitation stays, and
// inviting again renews and resends it).
func (s *Service) send(ctx context.Context, m mailer.Message) error {
	if s.mail == nil {
		return nil
	}
	if err := s.mail.Send(ctx, m); err != nil {
		return fmt.Errorf("%w: %w", ErrMailNotSent, err)
	}
	return nil
}

// status is how an open invitation is listed.
func status(expires, now time.Time) string {
	if !now.Before(expires) {
		return Expired
	}
	return Pending
}

// companyName reads a company's name for the e-mails.
func companyName(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, id string) (string, error) {
	var name string
	if err := q.QueryRow(ctx, `SELECT name FROM companies WHERE id = $1`, id).Scan(&name); err != nil {
		return "", fmt.Errorf("company name: %w", err)
	}
	return name, nil
}

// requireKind refuses callers of another company kind.
func requireKind(a Actor, kind, reason string) error {
	if a.Kind != kind {
		return &ForbiddenError{Reason: reason}
	}
	return nil
}

// revoke runs update (parameters: the invitation id, the caller's company, now) on an open
// invitation; no row touched is a foreign, closed or unknown invitation.
func (s *Service) revoke(ctx context.Context, update string, a Actor, id string) error {
	if !ids.Valid(ids.Invitation, id) {
		return &NotFoundError{What: "invitation"}
	}
	tag, err := s.db.Exec(ctx, update, id, a.CompanyID, s.now())
	if err != nil {
		return fmt.Errorf("revoke invitation: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return &NotFoundError{What: "invitation"}
	}
	return nil
}
