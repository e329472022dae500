package fraud

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/partnerstream/partnerstream/internal/store/chstore"
)

// ClickKey names a conversion's click in ClickHouse's clicks by what its sorting key needs
// (advertiser, program, day, click id), all of which the signed click id and its link give.
type ClickKey struct {
	AdvertiserID, ProgramID, ClickID string
	At                               time.Time
	// Window is click_velocity's window_seconds: the clicks of the same link from the click's
	// visitor or address in the window up to the click are counted (Click.RecentClicks); 0
	// counts nothing.
	Window time.Duration
}

// ClickStore reads clicks from ClickHouse for the click-stage rules.
type ClickStore struct {
	conn driver.Conn
	db   string
}

// NewClickStore reads the clicks table of database.
func NewClickStore(conn driver.Conn, database string) *ClickStore {
	return &ClickStore{conn: conn, db: database}
}

// noMatch stands in an IN list with nothing to match: no address or visitor key is "-".
const noMatch = "-"

// Clicks reads the clicks of keys by their sorting key, two queries for the whole batch (the
// clicks, then the clicks that count towards their velocity); a click not in ClickHouse (yet)
// is absent from the answer.
func (s *ClickStore) Clicks(ctx context.Context, keys []ClickKey) (map[string]Click, error) {
	if len(keys) == 0 {
		return map[string]Click{}, nil
	}
	var advertisers, programs, days, ids []string
	add := func(list *[]string, v string) {
		if !slices.Contains(*list, v) {
			*list = append(*list, v)
		}
	}
	byID := make(map[string]ClickKey, len(keys))
	for _, k := range keys {
		add(&advertisers, k.AdvertiserID)
		add(&programs, k.ProgramID)
		add(&days, k.At.UTC().Format(time.DateOnly))
		ids = append(ids, k.ClickID)
		byID[k.ClickID] = k
	}
	// The query is built before the call reads args: Go does not order reading an operand
	// against the calls beside it.
	var args []any
	query := `SELECT click_id, link_id, occurred_at, country, asn, hosting, device_type, browser, os,
		referrer_domain, utm_source, utm_medium, utm_campaign, paid_ads, ip, visitor, advertiser_id, program_id
		FROM ` + s.db + `.clicks
		WHERE advertiser_id IN ` + chstore.InList(&args, advertisers) + ` AND program_id IN ` + chstore.InList(&args, programs) + `
		AND toDate(occurred_at) IN ` + chstore.InList(&args, days) + ` AND click_id IN ` + chstore.InList(&args, ids)
	rows, err := s.conn.Query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("read clicks: %w", err)
	}
	defer rows.Close()
	out := make(map[string]Click, len(keys))
	who := map[string][2]string{} // click id: its stored address and visitor key
	for rows.Next() {
		var k Click
		var hosting uint8
		var paid, ip, visitor, advertiser, program string
		if err := rows.Scan(&k.ID, &k.LinkID, &k.At, &k.Country, &k.ASN, &hosting, &k.DeviceType, &k.Browser, &k.OS,
			&k.ReferrerDomain, &k.UTMSource, &k.UTMMedium, &k.UTMCampaign, &paid, &ip, &visitor, &advertiser, &program); err != nil {
			return nil, fmt.Errorf("read clicks: %w", err)
		}
		// The IN lists cross every advertiser with every program of the batch: keep the pairs asked for.
		if key, ok := byID[k.ID]; !ok || key.AdvertiserID != advertiser || key.ProgramID != program {
			continue
		}
		k.At, k.Hosting = k.At.UTC(), hosting == 1
		if paid != "" {
			k.PaidAds = strings.Split(paid, ",")
		}
		out[k.ID] = k
		who[k.ID] = [2]string{ip, visitor}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read clicks: %w", err)
	}
	if err := s.velocity(ctx, byID, out, who); err != nil {
		return nil, err
	}
	return out, nil
}

// velocity counts, for each found click whose key has a Window, the clicks of its link from
// its address or visitor in the window up to it (it included), in one query for the batch.
func (s *ClickStore) velocity(ctx context.Context, keys map[string]ClickKey, found map[string]Click, who map[string][2]string) error {
	var advertisers, programs, links []string
	ips, visitors := []string{noMatch}, []string{noMatch}
	var from, to time.Time
	for id, k := range found {
		key := keys[id]
		if key.Window <= 0 {
			continue
		}
		for list, v := range map[*[]string]string{&advertisers: key.AdvertiserID, &programs: key.ProgramID, &links: k.LinkID,
			&ips: who[id][0], &visitors: who[id][1]} {
			if v != "" && !slices.Contains(*list, v) {
				*list = append(*list, v)
			}
		}
		if start := k.At.Add(-key.Window); from.IsZero() || start.Before(from) {
			from = start
		}
		if k.At.After(to) {
			to = k.At
		}
	}
	if len(links) == 0 {
		return nil
	}
	var args []any
	query := `SELECT DISTINCT click_id, link_id, ip, visitor, occurred_at FROM ` + s.db + `.clicks
		WHERE advertiser_id IN ` + chstore.InList(&args, advertisers) + ` AND program_id IN ` + chstore.InList(&args, programs) + `
		AND toDate(occurred_at) >= toDate(?) AND toDate(occurred_at) <= toDate(?) AND occurred_at >= ? AND occurred_at <= ?`
	args = append(args, from, to, from, to)
	query += ` AND link_id IN ` + chstore.InList(&args, links) + ` AND (ip IN ` + chstore.InList(&args, ips) + ` OR visitor IN ` + chstore.InList(&args, visitors) + `)`
	rows, err := s.conn.Query(ctx, query, args...)
	if err != nil {
		return fmt.Errorf("count click velocity: %w", err)
	}
	defer rows.Close()
	var all []Visit
	for rows.Next() {
		var id string
		var x Visit
		if err := rows.Scan(&id, &x.Link, &x.IP, &x.Visitor, &x.At); err != nil {
			return fmt.Errorf("count click velocity: %w", err)
		}
		all = append(all, x)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("count click velocity: %w", err)
	}
	for id, k := range found {
		key := keys[id]
		if key.Window <= 0 {
			continue
		}
		k.RecentClicks = RecentClicks(k, who[id][0], who[id][1], key.Window, all)
		found[id] = k
	}
	return nil
}

// Visit is a stored click as click_velocity counts it.
type Visit struct {
	Link, IP, Visitor string
	At                time.Time
}

// RecentClicks is click_velocity's count for click k, made from address ip or visitor: the
// visits of its link from that address or that visitor in the window up to it, it included.
// Registration (ClickStore) and the backtest both count with it.
func RecentClicks(k Click, ip, visitor string, window time.Duration, visits []Visit) int {
	n := 0
	for _, x := range visits {
		if x.Link == k.LinkID && !x.At.Before(k.At.Add(-window)) && !x.At.After(k.At) &&
			(ip != "" && x.IP == ip || visitor != "" && x.Visitor == visitor) {
			n++
		}
	}
	return n
}
