// Package fraudreview is what an advertiser reviews of the fraud rules' work: the queue of
// flagged and held commissions with the evidence of their clicks, the daily e-mail of what
// was held, and the backtest of a rule set over a past period (docs/fraud.md).
package fraudreview

import (
	"context"
	"fmt"
	"time"

	"github.com/partnerstream/partnerstream/internal/conversions"
	"github.com/partnerstream/partnerstream/internal/page"
)

// Conversions lists the advertiser's conversions (conversions.Service).
type Conversions interface {
	List(ctx context.Context, v conversions.Viewer, f conversions.Filter, p page.Request) ([]conversions.Conversion, string, error)
}

// ClickKey finds one click: the columns that lead the clicks table's sorting key, so that a
// read of a page of them touches a few granules.
type ClickKey struct {
	AdvertiserID, ProgramID, ClickID string
	ClickedAt                        time.Time
}

// Click is the evidence a conversion's click gives: where and how it came. Fields ingest
// could not derive are empty.
type Click struct {
	At             time.Time
	Country        string
	Region, City   string
	ASN            uint32
	ASOrg          string
	Hosting        bool
	DeviceType     string
	Browser, OS    string
	Referrer       string
	ReferrerDomain string
}

// Clicks reads clicks by id. A click it does not find (not ingested yet, or a conversion
// attributed without one) is left out of the map.
type Clicks interface {
	Clicks(ctx context.Context, keys []ClickKey) (map[string]Click, error)
}

// Item is one commission of the queue with its click, when known.
type Item struct {
	Conversion conversions.Conversion
	Click      *Click
}

// Queue lists an advertiser's flagged and held commissions.
type Queue struct {
	Conversions Conversions
	Clicks      Clicks
}

// List returns a page of the advertiser's commissions that f selects (f.Risk defaults to
// conversions.RiskAny), newest first, each with its click's evidence.
func (q Queue) List(ctx context.Context, advertiserID string, f conversions.Filter, p page.Request) ([]Item, string, error) {
	if f.Risk == "" {
		f.Risk = conversions.RiskAny
	}
	list, next, err := q.Conversions.List(ctx, conversions.Viewer{CompanyID: advertiserID}, f, p)
	if err != nil {
		return nil, "", fmt.Errorf("list the review queue: %w", err)
	}
	var keys []ClickKey
	for _, c := range list {
		if c.ClickID != "" {
			keys = append(keys, ClickKey{AdvertiserID: c.AdvertiserID, ProgramID: c.ProgramID, ClickID: c.ClickID, ClickedAt: c.ClickedAt})
		}
	}
	clicks := map[string]Click{}
	if len(keys) > 0 && q.Clicks != nil {
		if clicks, err = q.Clicks.Clicks(ctx, keys); err != nil {
			return nil, "", fmt.Errorf("read the evidence of the review queue: %w", err)
		}
	}
	out := make([]Item, len(list))
	for i, c := range list {
		out[i].Conversion = c
		if k, ok := clicks[c.ClickID]; ok {
			out[i].Click = &k
		}
	}
	return out, next, nil
}
