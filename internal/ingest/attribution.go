package ingest

import (
	"context"
	"fmt"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/partnerstream/partnerstream/internal/clickid"
	"github.com/partnerstream/partnerstream/internal/events"
)

// attribute gives each conversion to be written the link, sub1 and origin of its click: from
// its stored state when it has one (a conversion keeps its attribution), else from the click
// index. A click not found leaves the link and sub1 as the event says and no origin, and
// counts in withoutClick. Every new conversion naming a click is looked up, even one whose
// event carries its link and sub1: the origin comes from the click alone.
//
// A signed click id converts milliseconds after the redirect, often before ingest stored the
// click. Such a conversion is written at once all the same, and returned in awaiting: the
// plan lists it in conversions_awaiting_click, and once the click is stored the conversion is
// moved to the click's sub1 and origin (clickWatcher, moveToClick). Waiting for the click
// instead would hold the whole events partition behind it.
func (w *Writer) attribute(ctx context.Context, convs []Conversion, newest map[string]int, stored map[string]storedConversion) (withoutClick int, awaiting map[string]bool, err error) {
	var want []int // indexes in convs of the conversions that need their click
	var clickIDs []string
	for id, i := range newest {
		c := &convs[i]
		if s := stored[id]; s.found {
			c.LinkID, c.Sub1, c.Origin = first(c.LinkID, s.LinkID), first(c.Sub1, s.Sub1), s.Origin
			continue
		}
		if c.ClickID != "" {
			want = append(want, i)
			clickIDs = append(clickIDs, c.ClickID)
		}
	}
	if len(clickIDs) == 0 {
		return 0, nil, nil
	}
	clicks, err := w.clicksOf(ctx, clickIDs)
	if err != nil {
		return 0, nil, fmt.Errorf("ingest: look up the clicks of conversions: %w", err)
	}
	for _, i := range want {
		c := &convs[i]
		k, ok := clicks[c.ClickID]
		switch {
		case ok:
			c.LinkID, c.Sub1, c.Origin = first(c.LinkID, k.LinkID), first(c.Sub1, k.Sub1), k.Origin
		case clickid.Signed(c.ClickID):
			// A plain id's click was stored long before its conversion, or never will be. One
			// whose event named its link and sub1 still awaits its click's origin.
			if awaiting == nil {
				awaiting = map[string]bool{}
			}
			awaiting[c.ID] = true
			if c.Sub1 == "" || c.LinkID == "" {
				withoutClick++
			}
		case c.Sub1 == "" || c.LinkID == "":
			withoutClick++
		}
	}
	return withoutClick, awaiting, nil
}

// clicksOf reads the link, sub1 and origin of the stored clicks among ids, by click id. Of
// two copies of a click not merged yet, the one with an origin wins: migration 0011 copies the
// clicks enriched before it into click_index again with their origin.
func (w *Writer) clicksOf(ctx context.Context, ids []string) (map[string]events.ClickArrivedData, error) {
	clicks := make(map[string]events.ClickArrivedData, len(ids))
	err := w.lookup(ctx, "SELECT click_id, link_id, sub1, "+events.ClickOriginColumns+" FROM "+w.db+".click_index WHERE click_id IN _ids", ids, func(rows driver.Rows) error {
		var d events.ClickArrivedData
		if err := rows.Scan(append([]any{&d.ClickID, &d.LinkID, &d.Sub1}, d.Origin.Fields()...)...); err != nil {
			return err
		}
		if prev, ok := clicks[d.ClickID]; !ok || prev.Origin == (events.ClickOrigin{}) {
			clicks[d.ClickID] = d
		}
		return nil
	})
	return clicks, err
}

// moveToClick gives c the link, sub1 and origin of its click, arrived after c was written
// without them, and reports whether that changed c. An arrival for another click (the
// conversion's click id changed since) or one c already took changes nothing.
func moveToClick(c *Conversion, arrived Conversion) bool {
	if c.ClickID != arrived.ClickID {
		return false
	}
	link, sub1, origin := first(c.LinkID, arrived.LinkID), first(c.Sub1, arrived.Sub1), c.Origin
	if origin == (events.ClickOrigin{}) {
		origin = arrived.Origin
	}
	if link == c.LinkID && sub1 == c.Sub1 && origin == c.Origin {
		return false
	}
	c.LinkID, c.Sub1, c.Origin = link, sub1, origin
	return true
}
