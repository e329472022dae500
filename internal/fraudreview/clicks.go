package fraudreview

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/partnerstream/partnerstream/internal/store/chstore"
)

// ClickHouseClicks reads the clicks' evidence from ClickHouse's clicks table.
type ClickHouseClicks struct {
	Conn     driver.Conn
	Database string
}

// Clicks reads the clicks of keys by the sorting key's columns (advertiser, program, day,
// click id), so a page of the queue reads a few granules whatever the traffic. A click
// stored twice (Kafka is at least once) reads once: any copy says the same.
func (s ClickHouseClicks) Clicks(ctx context.Context, keys []ClickKey) (map[string]Click, error) {
	out := map[string]Click{}
	byAdvertiser := map[string][]ClickKey{}
	for _, k := range keys {
		byAdvertiser[k.AdvertiserID] = append(byAdvertiser[k.AdvertiserID], k)
	}
	for advertiser, ks := range byAdvertiser {
		var programs, days, clickIDs []string
		for _, k := range ks {
			day := k.ClickedAt.UTC().Format(time.DateOnly)
			for _, v := range []struct {
				list *[]string
				v    string
			}{{&programs, k.ProgramID}, {&days, day}, {&clickIDs, k.ClickID}} {
				if !slices.Contains(*v.list, v.v) {
					*v.list = append(*v.list, v.v)
				}
			}
		}
		args := []any{advertiser}
		query := `SELECT click_id, any(occurred_at), any(country), any(region), any(city), any(asn), any(as_org),
			any(hosting), any(device_type), any(browser), any(os), any(referrer), any(referrer_domain)
			FROM ` + s.Database + `.clicks WHERE advertiser_id = ? AND program_id IN ` + chstore.InList(&args, programs) + `
			AND toDate(occurred_at) IN (` + dates(days) + `) AND click_id IN ` + chstore.InList(&args, clickIDs) + ` GROUP BY click_id`
		rows, err := s.Conn.Query(ctx, query, args...)
		if err != nil {
			return nil, fmt.Errorf("read clicks: %w", err)
		}
		for rows.Next() {
			var id string
			var c Click
			var hosting uint8
			if err := rows.Scan(&id, &c.At, &c.Country, &c.Region, &c.City, &c.ASN, &c.ASOrg, &hosting, &c.DeviceType, &c.Browser,
				&c.OS, &c.Referrer, &c.ReferrerDomain); err != nil {
				rows.Close()
				return nil, fmt.Errorf("read clicks: %w", err)
			}
			c.At, c.Hosting = c.At.UTC(), hosting == 1
			out[id] = c
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, fmt.Errorf("read clicks: %w", err)
		}
	}
	return out, nil
}

// dates is an IN list of Date literals: the days come from time.Format, never from input.
func dates(days []string) string {
	lits := make([]string, len(days))
	for i, d := range days {
		lits[i] = "toDate('" + d + "')"
	}
	return strings.Join(lits, ", ")
}
