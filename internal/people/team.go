package people

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/partnerstream/partnerstream/internal/identity"
	"github.com/partnerstream/partnerstream/internal/ids"
)

// Member is a user of the caller's company.
type Member struct {
	ID          string     `json:"id"`
	Email       string     `json:"email"`
	Name        string     `json:"name"`
	Role        string     `json:"role"`
	CreatedAt   time.Time  `json:"created_at"`
	LastLoginAt *time.Time `json:"last_login_at"`
}

// TeamInvitation is an open invitation to join the caller's company.
type TeamInvitation struct {
	ID        string    `json:"id"`
	Email     string    `json:"email"`
	Role      string    `json:"role"`
	Status    string    `json:"status"`
	CreatedAt time.Time `json:"created_at"`
	ExpiresAt time.Time `json:"expires_at"`
}

// TeamInvite is what inviting a colleague takes; Locale is the e-mail's language (the
// inviter's when empty).
type TeamInvite struct {
	Email  string `json:"email"`
	Role   string `json:"role"`
	Locale string `json:"locale"`
}

func validRole(r string) bool { return r == Owner || r == Admin || r == RoleMember }

func roleError() error {
	return &FieldError{Field: "role", Message: "must be owner, admin or member"}
}

// requireManager is the check of every change to the team.
func requireManager(a Actor) error {
	if !a.canManage() {
		return &ForbiddenError{Reason: "only owners and admins can manage the team"}
	}
	return nil
}

// Members lists the users of the caller's company, oldest first.
func (s *Service) Members(ctx context.Context, a Actor) ([]Member, error) {
	rows, _ := s.db.Query(ctx, `SELECT id, email, name, role, created_at, last_login_at FROM users
		WHERE company_id = $1 ORDER BY created_at, id`, a.CompanyID)
	list, err := pgx.CollectRows(rows, scanMember)
	if err != nil {
		return nil, fmt.Errorf("list members: %w", err)
	}
	return list, nil
}

func scanMember(row pgx.CollectableRow) (Member, error) {
	var m Member
	err := row.Scan(&m.ID, &m.Email, &m.Name, &m.Role, &m.CreatedAt, &m.LastLoginAt)
	m.CreatedAt = m.CreatedAt.UTC()
	return m, err
}

// TeamInvitations lists the caller's company's open invitations, newest first.
func (s *Service) TeamInvitations(ctx context.Context, a Actor) ([]TeamInvitation, error) {
	rows, _ := s.db.Query(ctx, `SELECT id, email, role, created_at, expires_at FROM team_invitations
		WHERE company_id = $1 AND accepted_at IS NULL AND revoked_at IS NULL ORDER BY created_at DESC, id DESC`, a.CompanyID)
	now := s.now()
	list, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (TeamInvitation, error) {
		var t TeamInvitation
		err := row.Scan(&t.ID, &t.Email, &t.Role, &t.CreatedAt, &t.ExpiresAt)
		t.CreatedAt, t.ExpiresAt, t.Status = t.CreatedAt.UTC(), t.ExpiresAt.UTC(), status(t.ExpiresAt, now)
		return t, err
	})
	if err != nil {
		return nil, fmt.Errorf("list team invitations: %w", err)
	}
	return list, nil
}

// InviteMember invites an address to the caller's company with a role and e-mails it.
// Inviting an address with an open invitation renews it (new role, new expiry) and resends
// the e-mail. An address that already has an account cannot be invited: an address
// belongs to one company.
func (s *Service) InviteMember(ctx context.Context, a Actor, in TeamInvite) (TeamInvitation, error) {
	if err := requireManager(a); err != nil {
		return TeamInvitation{}, err
	}
	email, err := normalizeEmail(in.Email)
	if err != nil {
		return TeamInvitation{}, err
	}
	if !validRole(in.Role) {
		return TeamInvitation{}, roleError()
	}
	if in.Role == Owner && a.Role != Owner {
		return TeamInvitation{}, &ForbiddenError{Reason: "only owners can invite owners"}
	}
	var company string
	if err := s.db.QueryRow(ctx, `SELECT company_id FROM users WHERE lower(email) = $1`, email).Scan(&company); err == nil {
		if company == a.CompanyID {
			return TeamInvitation{}, &ConflictError{Code: "already_member", Reason: "this address is already a member of the team"}
		}
		return TeamInvitation{}, &ConflictError{Code: "email_has_account", Reason: "this address already has an account; an address belongs to one company"}
	} else if !errors.Is(err, pgx.ErrNoRows) {
		return TeamInvitation{}, fmt.Errorf("invite member: %w", err)
	}
	now := s.now()
	t := TeamInvitation{ID: ids.New(ids.Invitation), Email: email, Role: in.Role, Status: Pending, CreatedAt: now, ExpiresAt: now.Add(s.o.TTL)}
	err = s.db.QueryRow(ctx, `INSERT INTO team_invitations (id, company_id, email, role, invited_by, created_at, expires_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7)
		ON CONFLICT (company_id, email) WHERE accepted_at IS NULL AND revoked_at IS NULL
		DO UPDATE SET role = EXCLUDED.role, invited_by = EXCLUDED.invited_by, created_at = EXCLUDED.created_at, expires_at = EXCLUDED.expires_at
		RETURNING id`, t.ID, a.CompanyID, t.Email, t.Role, nullable(a.UserID), t.CreatedAt, t.ExpiresAt).Scan(&t.ID)
	if err != nil {
		return TeamInvitation{}, fmt.Errorf("invite member: %w", err)
	}
	name, err := companyName(ctx, s.db, a.CompanyID)
	if err != nil {
		return TeamInvitation{}, err
	}
	return t, s.send(ctx, s.teamMessage(email, name, t.Role, pick(in.Locale, a.Locale), s.o.TTL))
}

// nullable maps an empty id (an API key caller) to NULL.
func nullable(id string) any {
	if id == "" {
		return nil
	}
	return id
}

func pick(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// RevokeTeamInvitation ends an open invitation of the caller's company.
func (s *Service) RevokeTeamInvitation(ctx context.Context, a Actor, id string) error {
	if err := requireManager(a); err != nil {
		return err
	}
	return s.revoke(ctx, `UPDATE team_invitations SET revoked_at = $3
		WHERE id = $1 AND company_id = $2 AND accepted_at IS NULL AND revoked_at IS NULL`, a, id)
}

// SetRole changes a member's role. Only owners grant or take away the owner role, and the
// last owner keeps it. The member's sessions end, so the new role applies at once.
func (s *Service) SetRole(ctx context.Context, a Actor, userID, role string) (Member, error) {
	if !validRole(role) {
		return Member{}, roleError()
	}
	var m Member
	err := s.changeMember(ctx, a, userID, func(tx pgx.Tx, target Member, owners int) error {
		if target.Role == role {
			m = target
			return nil
		}
		if (target.Role == Owner || role == Owner) && a.Role != Owner {
			return &ForbiddenError{Reason: "only owners can grant or take away the owner role"}
		}
		if target.Role == Owner && owners == 1 {
			return lastOwner()
		}
		m = target
		m.Role = role
		if _, err := tx.Exec(ctx, `UPDATE users SET role = $2 WHERE id = $1`, m.ID, role); err != nil {
			return fmt.Errorf("set role: %w", err)
		}
		if _, err := tx.Exec(ctx, `UPDATE sessions SET revoked_at = $2 WHERE user_id = $1 AND revoked_at IS NULL`, m.ID, s.now()); err != nil {
			return fmt.Errorf("end sessions after role change: %w", err)
		}
		return nil
	})
	return m, err
}

// RemoveMember deletes a user of the caller's company (its sessions end with it). Only
// owners remove owners, and the last owner stays.
func (s *Service) RemoveMember(ctx context.Context, a Actor, userID string) error {
	return s.changeMember(ctx, a, userID, func(tx pgx.Tx, target Member, owners int) error {
		if target.Role == Owner && a.Role != Owner {
			return &ForbiddenError{Reason: "only owners can remove owners"}
		}
		if target.Role == Owner && owners == 1 {
			return lastOwner()
		}
		if _, err := tx.Exec(ctx, `DELETE FROM users WHERE id = $1`, target.ID); err != nil {
			return fmt.Errorf("remove member: %w", err)
		}
		return nil
	})
}

func lastOwner() error {
	return &ConflictError{Code: "last_owner", Reason: "a company keeps at least one owner: make another member owner first"}
}

// changeMember locks the company's users (so two owners cannot demote each other at once
// and leave none), finds the target among them and lets change act.
func (s *Service) changeMember(ctx context.Context, a Actor, userID string, change func(tx pgx.Tx, target Member, owners int) error) error {
	if err := requireManager(a); err != nil {
		return err
	}
	if !ids.Valid(ids.User, userID) {
		return &NotFoundError{What: "member"}
	}
	return pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		rows, _ := tx.Query(ctx, `SELECT id, email, name, role, created_at, last_login_at FROM users
			WHERE company_id = $1 ORDER BY id FOR UPDATE`, a.CompanyID)
		team, err := pgx.CollectRows(rows, scanMember)
		if err != nil {
			return fmt.Errorf("lock team: %w", err)
		}
		owners, found := 0, -1
		for i, m := range team {
			if m.Role == Owner {
				owners++
			}
			if m.ID == userID {
				found = i
			}
		}
		if found < 0 {
			return &NotFoundError{What: "member"}
		}
		return change(tx, team[found], owners)
	})
}

// AcceptTeamInvitation is a first sign-in of an address with an open, unexpired team
// invitation: it makes the user in the inviting company with the invited role (the newest
// invitation wins when several companies invited the address) and closes the invitation.
// ok is false when the address has no such invitation.
func (s *Service) AcceptTeamInvitation(ctx context.Context, email, name string) (u identity.User, co identity.Company, ok bool, err error) {
	email, err = normalizeEmail(email)
	if err != nil {
		return u, co, false, nil
	}
	now := s.now()
	err = pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		var invitation string
		err := tx.QueryRow(ctx, `SELECT i.id, i.role, c.id, c.kind, c.name, c.locale, c.created_at
			FROM team_invitations i JOIN companies c ON c.id = i.company_id
			WHERE i.email = $1 AND i.accepted_at IS NULL AND i.revoked_at IS NULL AND i.expires_at > $2
			ORDER BY i.created_at DESC LIMIT 1 FOR UPDATE OF i`, email, now).
			Scan(&invitation, &u.Role, &co.ID, &co.Kind, &co.Name, &co.Locale, &co.CreatedAt)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("find team invitation: %w", err)
		}
		u.ID, u.CompanyID, u.Email, u.Name, u.Locale = ids.New(ids.User), co.ID, email, name, co.Locale
		if err := tx.QueryRow(ctx, `INSERT INTO users (id, company_id, email, name, role, locale) VALUES ($1, $2, $3, $4, $5, $6) RETURNING created_at`,
			u.ID, u.CompanyID, u.Email, u.Name, u.Role, u.Locale).Scan(&u.CreatedAt); err != nil {
			return fmt.Errorf("join team: %w", err)
		}
		if _, err := tx.Exec(ctx, `UPDATE team_invitations SET accepted_at = $2 WHERE id = $1`, invitation, now); err != nil {
			return fmt.Errorf("accept team invitation: %w", err)
		}
		ok = true
		return nil
	})
	if err != nil {
		return identity.User{}, identity.Company{}, false, err
	}
	return u, co, ok, nil
}

// HasTeamInvitation reports whether the address has an open, unexpired team invitation: a
// first sign-in then needs no registration.
func (s *Service) HasTeamInvitation(ctx context.Context, email string) (bool, error) {
	email, err := normalizeEmail(email)
	if err != nil {
		return false, nil
	}
	var found bool
	if err := s.db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM team_invitations
		WHERE email = $1 AND accepted_at IS NULL AND revoked_at IS NULL AND expires_at > $2)`, email, s.now()).Scan(&found); err != nil {
		return false, fmt.Errorf("find team invitation: %w", err)
	}
	return found, nil
}
