package conversions

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Click is what attribution needs to know about a click.
type Click struct {
	ID           string
	OccurredAt   time.Time
	LinkID       string
	ProgramID    string
	AffiliateID  string
	AdvertiserID string
	PromotionID  string
	Sub1         string
}

// ErrClickNotFound: no key verifies the click id, or its link is gone.
var ErrClickNotFound = errors.New("click not found")

// signedClick is the click a signed id names: its link and time from the id, the rest from
// the link in Postgres. An id no key verifies, or whose link is gone, is ErrClickNotFound.
// The promotion is the link's now, and the sub-ids are not in the id (the click's own reach
// ClickHouse with the click, where ingest gives them to the conversion).
func (s *Service) signedClick(ctx context.Context, clickID string) (Click, error) {
	c, ok := s.clickIDs.Verify(clickID)
	if !ok {
		return Click{}, ErrClickNotFound
	}
	k := Click{ID: clickID, OccurredAt: c.At, LinkID: c.LinkID}
	var promotion *string
	err := s.db.QueryRow(ctx, `SELECT program_id, affiliate_id, advertiser_id, promotion_id FROM tracking_links WHERE id = $1`, c.LinkID).
		Scan(&k.ProgramID, &k.AffiliateID, &k.AdvertiserID, &promotion)
	if errors.Is(err, pgx.ErrNoRows) {
		return Click{}, ErrClickNotFound
	}
	if err != nil {
		return Click{}, fmt.Errorf("read link %s of click %s: %w", c.LinkID, clickID, err)
	}
	if promotion != nil {
		k.PromotionID = *promotion
	}
	return k, nil
}
