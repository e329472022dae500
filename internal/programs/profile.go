package programs

import (
	"context"
	"fmt"
	"net/mail"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/partnerstream/partnerstream/internal/identity"
	"github.com/partnerstream/partnerstream/internal/ids"
)

// Limits of a partner profile (the partner_profiles table checks the same).
const (
	MaxDisplayNameLen = 200 // characters, as companies.name
	MaxAudienceLen    = 2000
	MaxEmailLen       = 254 // bytes, the longest address SMTP carries
)

// Profile is what an affiliate company tells the brands it works with about itself. Its
// display name is the company's name, shown wherever the company appears.
type Profile struct {
	CompanyID   string `json:"company_id"`
	DisplayName string `json:"display_name"`
	Website     string `json:"website"`
	// Audience describes the audience and the promotional methods.
	Audience    string `json:"audience"`
	PayoutEmail string `json:"payout_email"`
	// UpdatedAt is null until the profile is first saved.
	UpdatedAt *time.Time `json:"updated_at"`
}

// ProfileInput replaces a profile whole; empty optional fields clear them.
type ProfileInput struct {
	DisplayName string `json:"display_name"`
	Website     string `json:"website"`
	Audience    string `json:"audience"`
	PayoutEmail string `json:"payout_email"`
}

// profileSelect reads the affiliate @company's profile; a company that never saved one has
// an empty profile under its name.
const profileSelect = `SELECT c.id, c.name, COALESCE(f.website, ''), COALESCE(f.audience, ''), COALESCE(f.payout_email, ''), f.updated_at
	FROM companies c LEFT JOIN partner_profiles f ON f.company_id = c.id WHERE c.id = @company AND c.kind = 'affiliate'`

func scanProfile(row pgx.CollectableRow) (Profile, error) {
	var p Profile
	err := row.Scan(&p.CompanyID, &p.DisplayName, &p.Website, &p.Audience, &p.PayoutEmail, &p.UpdatedAt)
	if p.UpdatedAt != nil {
		t := p.UpdatedAt.UTC()
		p.UpdatedAt = &t
	}
	return p, err
}

// OwnProfile returns the actor's (an affiliate's) own profile.
func (s *Service) OwnProfile(ctx context.Context, a Actor) (Profile, error) {
	if a.Kind != identity.Affiliate {
		return Profile{}, &ForbiddenError{Reason: "only affiliates have a partner profile"}
	}
	return queryOne(ctx, s.db, "profile", profileSelect, pgx.NamedArgs{"company": a.CompanyID}, scanProfile)
}

// UpdateProfile replaces the actor's (an affiliate owner's or admin's) profile; the display
// name renames the company.
func (s *Service) UpdateProfile(ctx context.Context, a Actor, in ProfileInput) (Profile, error) {
	if a.Kind != identity.Affiliate {
		return Profile{}, &ForbiddenError{Reason: "only affiliates have a partner profile"}
	}
	if !a.canWrite() {
		return Profile{}, &ForbiddenError{Reason: "only owners and admins can change the profile"}
	}
	in.DisplayName, in.Website, in.PayoutEmail = strings.TrimSpace(in.DisplayName), strings.TrimSpace(in.Website), strings.TrimSpace(in.PayoutEmail)
	in.Audience = strings.TrimSpace(in.Audience)
	v := &validator{}
	v.text("display_name", in.DisplayName, 1, MaxDisplayNameLen, false)
	if in.Website != "" {
		v.landingURL("website", in.Website)
	}
	v.text("audience", in.Audience, 0, MaxAudienceLen, true)
	if in.PayoutEmail != "" {
		v.email("payout_email", in.PayoutEmail)
	}
	if err := v.err(); err != nil {
		return Profile{}, err
	}
	var out Profile
	err := pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `UPDATE companies SET name = $2, updated_at = $3 WHERE id = $1`, a.CompanyID, in.DisplayName, s.now()); err != nil {
			return fmt.Errorf("rename company: %w", err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO partner_profiles (company_id, website, audience, payout_email, updated_at)
			VALUES ($1, $2, $3, $4, $5) ON CONFLICT (company_id) DO UPDATE
			SET website = EXCLUDED.website, audience = EXCLUDED.audience, payout_email = EXCLUDED.payout_email, updated_at = EXCLUDED.updated_at`,
			a.CompanyID, in.Website, in.Audience, in.PayoutEmail, s.now()); err != nil {
			return fmt.Errorf("save profile: %w", err)
		}
		var err error
		out, err = queryOne(ctx, tx, "profile", profileSelect, pgx.NamedArgs{"company": a.CompanyID}, scanProfile)
		return err
	})
	if err != nil {
		return Profile{}, err
	}
	return out, nil
}

// PartnerProfile returns the profile of an affiliate that has applied to one of the actor's
// (an advertiser's) programs, whatever became of the application. Any other affiliate is
// not found: a brand learns nothing of affiliates it has no relationship with.
func (s *Service) PartnerProfile(ctx context.Context, a Actor, affiliateID string) (Profile, error) {
	if a.Kind != identity.Advertiser {
		return Profile{}, &ForbiddenError{Reason: "only advertisers read their partners' profiles"}
	}
	v := &validator{}
	v.id("id", ids.Company, affiliateID)
	if err := v.err(); err != nil {
		return Profile{}, err
	}
	return queryOne(ctx, s.db, "affiliate", profileSelect+
		` AND EXISTS (SELECT 1 FROM partnerships s WHERE s.affiliate_id = c.id AND s.advertiser_id = @advertiser)`,
		pgx.NamedArgs{"company": affiliateID, "advertiser": a.CompanyID}, scanProfile)
}

// email checks a bare address (no display name, no angle brackets) of at most MaxEmailLen
// bytes.
func (v *validator) email(field, s string) {
	addr, err := mail.ParseAddress(s)
	switch {
	case len(s) > MaxEmailLen:
		v.add(field, "must be at most 254 bytes")
	case err != nil || addr.Name != "" || addr.Address != s:
		v.add(field, "must be an e-mail address")
	}
}
