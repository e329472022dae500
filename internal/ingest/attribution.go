package ingest

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/partnerstream/partnerstream/internal/clickid"
)

// errClickPending holds a batch of conversions whose clicks may still be on their way to
// ClickHouse; ingest plans the batch again a moment later (consumer.retrying).
var errClickPending = errors.New("conversions wait for their clicks")

// attribute gives each conversion to be written the link and sub1 of its click: from its
// stored state when it has one (a conversion keeps its attribution), else from the click
// index. A click not found leaves them as the event says, and counts in withoutClick.
//
// Except while it may still come: a signed click id converts milliseconds after the
// redirect, before ingest stored the click, and a conversion keeps the attribution it was
// first written with. So a new conversion whose signed click is not stored holds the whole
// batch (errClickPending, nothing written) until the clicks consumer stored the click, or
// until clickWait has passed since ingest read the event and since ClickHouse last became
// reachable (an outage, a restart), whichever is later.
func (w *Writer) attribute(ctx context.Context, convs []Conversion, newest map[string]int, stored map[string]storedConversion) (withoutClick int, err error) {
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
		awaitingClick.Set(0)
		return 0, nil
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
		return 0, fmt.Errorf("ingest: look up the clicks of conversions: %w", err)
	}
	now, reachable := w.now(), w.reachableSince()
	pending := 0
	for _, i := range want {
		c := &convs[i]
		k, ok := clicks[c.ClickID]
		switch {
		case ok:
			c.LinkID, c.Sub1 = first(c.LinkID, k.link), first(c.Sub1, k.sub1)
		case w.clickWait > 0 && clickid.Signed(c.ClickID) && now.Before(later(c.Published, reachable).Add(w.clickWait)):
			pending++
		default:
			withoutClick++
		}
	}
	awaitingClick.Set(float64(pending))
	if pending > 0 {
		return 0, fmt.Errorf("%w: %d of the batch's conversions", errClickPending, pending)
	}
	return withoutClick, nil
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
