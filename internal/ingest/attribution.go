package ingest

import (
	"context"
	"fmt"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/partnerstream/partnerstream/internal/clickid"
)

// attribute gives each conversion to be written the link and sub1 of its click: from its
// stored state when it has one (a conversion keeps its attribution), else from the click
// index. A click not found leaves them as the event says, and counts in withoutClick.
//
// A signed click id converts milliseconds after the redirect, often before ingest stored the
// click. Such a conversion is written at once all the same, and returned in awaiting: the
// plan lists it in conversions_awaiting_click, and once the click is stored the conversion is
// moved to the click's sub1 (clickWatcher, moveToClick). Waiting for the click instead would
// hold the whole events partition behind it.
func (w *Writer) attribute(ctx context.Context, convs []Conversion, newest map[string]int, stored map[string]storedConversion) (withoutClick int, awaiting map[string]bool, err error) {
	var want []int // indexes in convs of the conversions that need their click
	var clickIDs []string
	for id, i := range newest {
		c := &convs[i]
		if s := stored[id]; s.found {
			c.LinkID, c.Sub1 = first(c.LinkID, s.LinkID), first(c.Sub1, s.Sub1)
			continue
		}
		if c.ClickID != "" && (c.Sub1 == "" || c.LinkID == "") {
			want = append(want, i)
			clickIDs = append(clickIDs, c.ClickID)
		}
	}
	if len(clickIDs) == 0 {
		return 0, nil, nil
	}
	type click struct{ link, sub1 string }
	clicks := make(map[string]click, len(clickIDs))
	err = w.lookup(ctx, "SELECT click_id, link_id, sub1 FROM "+w.db+".click_index WHERE click_id IN _ids", clickIDs, func(rows driver.Rows) error {
		var id string
		var c click
		if err := rows.Scan(&id, &c.link, &c.sub1); err != nil {
			return err
		}
		clicks[id] = c
		return nil
	})
	if err != nil {
		return 0, nil, fmt.Errorf("ingest: look up the clicks of conversions: %w", err)
	}
	for _, i := range want {
		c := &convs[i]
		k, ok := clicks[c.ClickID]
		switch {
		case ok:
			c.LinkID, c.Sub1 = first(c.LinkID, k.link), first(c.Sub1, k.sub1)
		case clickid.Signed(c.ClickID):
			// A plain id's click was stored long before its conversion, or never will be.
			if awaiting == nil {
				awaiting = map[string]bool{}
			}
			awaiting[c.ID] = true
			withoutClick++
		default:
			withoutClick++
		}
	}
	return withoutClick, awaiting, nil
}

// moveToClick gives c the link and sub1 of its click, arrived after c was written without
// them, and reports whether that changed c. An arrival for another click (the conversion's
// click id changed since) or one c already took changes nothing.
func moveToClick(c *Conversion, arrived Conversion) bool {
	if c.ClickID != arrived.ClickID {
		return false
	}
	link, sub1 := first(c.LinkID, arrived.LinkID), first(c.Sub1, arrived.Sub1)
	if link == c.LinkID && sub1 == c.Sub1 {
		return false
	}
	c.LinkID, c.Sub1 = link, sub1
	return true
}
