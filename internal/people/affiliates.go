package people

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/partnerstream/partnerstream/internal/identity"
	"github.com/partnerstream/partnerstream/internal/ids"
	"github.com/partnerstream/partnerstream/internal/programs"
)

// AffiliateInvitation is a brand's invitation of an affiliate to one of its programs. The
// brand sees the address; the invited affiliate sees the program and the brand instead.
type AffiliateInvitation struct {
	ID             string    `json:"id"`
	ProgramID      string    `json:"program_id"`
	ProgramName    string    `json:"program_name"`
	AdvertiserName string    `json:"advertiser_name,omitempty"`
	Email          string    `json:"email,omitempty"`
	Status         string    `json:"status"`
	CreatedAt      time.Time `json:"created_at"`
	ExpiresAt      time.Time `json:"expires_at"`
}

// AffiliateInvite is what inviting an affiliate takes; Locale is the e-mail's language.
type AffiliateInvite struct {
	Email  string `json:"email"`
	Locale string `json:"locale"`
}

// requireBrandManager is the check of a brand's changes to its invitations.
func requireBrandManager(a Actor) error {
	if err := requireKind(a, identity.Advertiser, "only advertisers invite affiliates to their programs"); err != nil {
		return err
	}
	if !a.canManage() {
		return &ForbiddenError{Reason: "only owners and admins can invite affiliates"}
	}
	return nil
}

// InviteAffiliate invites an address to one of the caller's programs (any visibility, not
// archived) and e-mails it. Inviting an address again renews its open invitation.
func (s *Service) InviteAffiliate(ctx context.Context, a Actor, programID string, in AffiliateInvite) (AffiliateInvitation, error) {
	if err := requireBrandManager(a); err != nil {
		return AffiliateInvitation{}, err
	}
	email, err := normalizeEmail(in.Email)
	if err != nil {
		return AffiliateInvitation{}, err
	}
	if !ids.Valid(ids.Program, programID) {
		return AffiliateInvitation{}, &NotFoundError{What: "program"}
	}
	now := s.now()
	inv := AffiliateInvitation{ID: ids.New(ids.Invitation), ProgramID: programID, Email: email, Status: Pending, CreatedAt: now, ExpiresAt: now.Add(s.o.TTL)}
	err = pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		err := tx.QueryRow(ctx, `SELECT p.name, c.name FROM programs p JOIN companies c ON c.id = p.advertiser_id
			WHERE p.id = $1 AND p.advertiser_id = $2 AND p.status <> $3 FOR SHARE OF p`, programID, a.CompanyID, programs.ProgramArchived).
			Scan(&inv.ProgramName, &inv.AdvertiserName)
		if errors.Is(err, pgx.ErrNoRows) {
			return &NotFoundError{What: "program"}
		}
		if err != nil {
			return fmt.Errorf("invited program: %w", err)
		}
		if err := tx.QueryRow(ctx, `INSERT INTO affiliate_invitations (id, program_id, advertiser_id, email, invited_by, created_at, expires_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7)
			ON CONFLICT (program_id, email) WHERE accepted_at IS NULL AND revoked_at IS NULL
			DO UPDATE SET invited_by = EXCLUDED.invited_by, created_at = EXCLUDED.created_at, expires_at = EXCLUDED.expires_at
			RETURNING id`, inv.ID, programID, a.CompanyID, email, nullable(a.UserID), inv.CreatedAt, inv.ExpiresAt).Scan(&inv.ID); err != nil {
			return fmt.Errorf("invite affiliate: %w", err)
		}
		return nil
	})
	if err != nil {
		return AffiliateInvitation{}, err
	}
	msg := s.affiliateMessage(email, inv.AdvertiserName, inv.ProgramName, pick(in.Locale, a.Locale), s.o.TTL)
	inv.AdvertiserName = ""
	return inv, s.send(ctx, msg)
}

// ProgramInvitations lists the open invitations of one of the caller's programs, newest
// first.
func (s *Service) ProgramInvitations(ctx context.Context, a Actor, programID string) ([]AffiliateInvitation, error) {
	if err := requireKind(a, identity.Advertiser, "only advertisers see the invitations of their programs"); err != nil {
		return nil, err
	}
	if !ids.Valid(ids.Program, programID) {
		return nil, &NotFoundError{What: "program"}
	}
	var exists bool
	if err := s.db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM programs WHERE id = $1 AND advertiser_id = $2)`, programID, a.CompanyID).Scan(&exists); err != nil {
		return nil, fmt.Errorf("program invitations: %w", err)
	}
	if !exists {
		return nil, &NotFoundError{What: "program"}
	}
	rows, _ := s.db.Query(ctx, `SELECT i.id, i.program_id, p.name, i.email, i.created_at, i.expires_at
		FROM affiliate_invitations i JOIN programs p ON p.id = i.program_id
		WHERE i.program_id = $1 AND i.advertiser_id = $2 AND i.accepted_at IS NULL AND i.revoked_at IS NULL
		ORDER BY i.created_at DESC, i.id DESC`, programID, a.CompanyID)
	now := s.now()
	list, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (AffiliateInvitation, error) {
		var i AffiliateInvitation
		err := row.Scan(&i.ID, &i.ProgramID, &i.ProgramName, &i.Email, &i.CreatedAt, &i.ExpiresAt)
		i.CreatedAt, i.ExpiresAt, i.Status = i.CreatedAt.UTC(), i.ExpiresAt.UTC(), status(i.ExpiresAt, now)
		return i, err
	})
	if err != nil {
		return nil, fmt.Errorf("program invitations: %w", err)
	}
	return list, nil
}

// RevokeAffiliateInvitation ends an open invitation to one of the caller's programs.
func (s *Service) RevokeAffiliateInvitation(ctx context.Context, a Actor, id string) error {
	if err := requireBrandManager(a); err != nil {
		return err
	}
	return s.revoke(ctx, `UPDATE affiliate_invitations SET revoked_at = $3
		WHERE id = $1 AND advertiser_id = $2 AND accepted_at IS NULL AND revoked_at IS NULL`, a, id)
}

// myInvitations is the SQL of the open, unexpired invitations addressed to the signed-in
// user's address, to programs that are not archived.
const myInvitations = ` FROM affiliate_invitations i
	JOIN programs p ON p.id = i.program_id JOIN companies c ON c.id = i.advertiser_id
	WHERE i.email = (SELECT lower(email) FROM users WHERE id = @user AND company_id = @company)
	AND i.accepted_at IS NULL AND i.revoked_at IS NULL AND i.expires_at > @now AND p.status <> @archived`

// MyInvitations lists the affiliate invitations addressed to the signed-in affiliate user.
func (s *Service) MyInvitations(ctx context.Context, a Actor) ([]AffiliateInvitation, error) {
	if err := requireKind(a, identity.Affiliate, "only affiliates are invited to programs"); err != nil {
		return nil, err
	}
	rows, _ := s.db.Query(ctx, `SELECT i.id, i.program_id, p.name, c.name, i.created_at, i.expires_at`+myInvitations+
		` ORDER BY i.created_at DESC, i.id DESC`,
		pgx.NamedArgs{"user": a.UserID, "company": a.CompanyID, "now": s.now(), "archived": programs.ProgramArchived})
	list, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (AffiliateInvitation, error) {
		i := AffiliateInvitation{Status: Pending}
		err := row.Scan(&i.ID, &i.ProgramID, &i.ProgramName, &i.AdvertiserName, &i.CreatedAt, &i.ExpiresAt)
		i.CreatedAt, i.ExpiresAt = i.CreatedAt.UTC(), i.ExpiresAt.UTC()
		return i, err
	})
	if err != nil {
		return nil, fmt.Errorf("my invitations: %w", err)
	}
	return list, nil
}

// AcceptAffiliateInvitation makes the caller's company an approved partner of the
// invitation's program and closes the invitation. Only owners and admins accept, like they
// apply.
func (s *Service) AcceptAffiliateInvitation(ctx context.Context, a Actor, id string) (programs.Partnership, error) {
	if err := requireKind(a, identity.Affiliate, "only affiliates accept invitations to programs"); err != nil {
		return programs.Partnership{}, err
	}
	if !a.canManage() {
		return programs.Partnership{}, &ForbiddenError{Reason: "only owners and admins can accept invitations to programs"}
	}
	if !ids.Valid(ids.Invitation, id) {
		return programs.Partnership{}, &NotFoundError{What: "invitation"}
	}
	now := s.now()
	var p programs.Partnership
	err := pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		var program string
		err := tx.QueryRow(ctx, `SELECT i.program_id`+myInvitations+` AND i.id = @id FOR UPDATE OF i`,
			pgx.NamedArgs{"id": id, "user": a.UserID, "company": a.CompanyID, "now": now, "archived": programs.ProgramArchived}).Scan(&program)
		if errors.Is(err, pgx.ErrNoRows) {
			return &NotFoundError{What: "invitation"}
		}
		if err != nil {
			return fmt.Errorf("find invitation: %w", err)
		}
		if p, _, err = programs.JoinInvited(ctx, tx, now, program, a.CompanyID); errors.Is(err, programs.ErrDecided) {
			return &ConflictError{Code: "partnership_decided", Reason: err.Error()}
		} else if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE affiliate_invitations SET accepted_at = $2, accepted_by = $3 WHERE id = $1`, id, now, a.CompanyID); err != nil {
			return fmt.Errorf("accept invitation: %w", err)
		}
		return nil
	})
	if err != nil {
		return programs.Partnership{}, err
	}
	return p, nil
}
