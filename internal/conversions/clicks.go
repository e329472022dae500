package conversions

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
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

// ErrClickNotFound is returned by a ClickFinder that has no such click (yet).
var ErrClickNotFound = errors.New("click not found")

// ClickFinder looks a click up by id. Clicks live in ClickHouse, not Postgres: they flow from
// the redirect through Kafka and ingest, so a click a few seconds old may not be found yet.
type ClickFinder interface {
	FindClick(ctx context.Context, clickID string) (Click, error)
}

// signedClick is the click a signed id names: its link and time from the id, the rest from
// the link in Postgres. An id no key verifies, or whose link is gone, is ErrClickNotFound.
// The promotion is the link's now, and the sub-ids are not in the id (the click's own are
// in ClickHouse).
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

// ClickHouseClicks finds clicks in the click_index table of ClickHouse migration 0002, which
// a materialized view fills from every insert into clicks.
type ClickHouseClicks struct {
	conn  driver.Conn
	query string
}

// NewClickHouseClicks reads from database (the one chstore.Migrate prepared).
func NewClickHouseClicks(conn driver.Conn, database string) *ClickHouseClicks {
	return &ClickHouseClicks{conn: conn, query: `SELECT click_id, occurred_at, link_id, program_id, affiliate_id,
		advertiser_id, promotion_id, sub1 FROM ` + database + `.click_index FINAL WHERE click_id = ? LIMIT 1`}
}

// FindClick implements ClickFinder.
func (c *ClickHouseClicks) FindClick(ctx context.Context, clickID string) (Click, error) {
	rows, err := c.conn.Query(ctx, c.query, clickID)
	if err != nil {
		return Click{}, fmt.Errorf("find click %s: %w", clickID, err)
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return Click{}, fmt.Errorf("find click %s: %w", clickID, err)
		}
		return Click{}, ErrClickNotFound
	}
	var k Click
	if err := rows.Scan(&k.ID, &k.OccurredAt, &k.LinkID, &k.ProgramID, &k.AffiliateID, &k.AdvertiserID, &k.PromotionID, &k.Sub1); err != nil {
		return Click{}, fmt.Errorf("find click %s: %w", clickID, err)
	}
	k.OccurredAt = k.OccurredAt.UTC()
	return k, nil
}
