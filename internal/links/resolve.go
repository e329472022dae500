package links

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Target is everything the redirect needs to know about a code, in one row. It carries the
// states of the link, program and partnership rather than a verdict, so the redirect can say
// why it refused in its logs.
type Target struct {
	LinkID, Code, ProgramID, PartnershipID, AffiliateID, AdvertiserID string
	PromotionID                                                       string // "" without one
	LinkStatus, ProgramStatus, PartnershipStatus                      string
	// ClickParam is the query parameter the landing page receives the click id in.
	ClickParam string
	// Subs are the link's sub1..sub5 defaults.
	Subs [5]string
	// ProgramLandingURL is the program's landing page; DestinationURL the link's override
	// ("" without one); PromotionLandingURL the promotion's ("" without one), which applies
	// only between PromotionStartsAt and PromotionEndsAt (either may be nil: unbounded).
	ProgramLandingURL, DestinationURL, PromotionLandingURL string
	PromotionStartsAt, PromotionEndsAt                     *time.Time
}

// Redirects reports whether the link may send visitors on: the link is active, its program
// is active and the partnership is approved.
func (t Target) Redirects() bool {
	return t.LinkStatus == Active && t.ProgramStatus == "active" && t.PartnershipStatus == "approved"
}

// Resolve returns what a code points at, or ErrNotFound. It reads the database every time;
// the redirect caches the answer.
func (s *Service) Resolve(ctx context.Context, code string) (Target, error) {
	if !ValidCode(code) {
		return Target{}, ErrNotFound
	}
	var t Target
	var promotionID, destination, promotionLanding *string
	err := s.db.QueryRow(ctx, `
		SELECT l.id, l.code, l.program_id, l.partnership_id, l.affiliate_id, l.advertiser_id, l.promotion_id,
		       l.status, p.status, ptn.status, p.click_param, l.sub1, l.sub2, l.sub3, l.sub4, l.sub5,
		       p.landing_url, l.destination_url, prm.landing_url, prm.starts_at, prm.ends_at
		FROM tracking_links l
		JOIN programs p ON p.id = l.program_id
		JOIN partnerships ptn ON ptn.id = l.partnership_id
		LEFT JOIN promotions prm ON prm.id = l.promotion_id
		WHERE l.code = $1`, code).Scan(
		&t.LinkID, &t.Code, &t.ProgramID, &t.PartnershipID, &t.AffiliateID, &t.AdvertiserID, &promotionID,
		&t.LinkStatus, &t.ProgramStatus, &t.PartnershipStatus, &t.ClickParam, &t.Subs[0], &t.Subs[1], &t.Subs[2], &t.Subs[3], &t.Subs[4],
		&t.ProgramLandingURL, &destination, &promotionLanding, &t.PromotionStartsAt, &t.PromotionEndsAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return Target{}, ErrNotFound
	}
	if err != nil {
		return Target{}, fmt.Errorf("resolve link %s: %w", code, err)
	}
	t.PromotionID, t.DestinationURL, t.PromotionLandingURL = deref(promotionID), deref(destination), deref(promotionLanding)
	return t, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
