package ingest

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/partnerstream/partnerstream/internal/events"
	"github.com/partnerstream/partnerstream/internal/testenv/chtest"
)

// These tests walk events.ClickFields, the click's wire format: a field added there and not
// to the decoder, the record or the ClickHouse schema fails one of them.

func TestClickKeyKnowsEveryField(t *testing.T) {
	for f, spec := range events.ClickFields {
		if got := clickKey([]byte(spec.JSON)); got != events.ClickField(f) && takes[f] != skip {
			t.Errorf("clickKey(%q) = %d, want %d", spec.JSON, got, f)
		}
	}
	if got := clickKey([]byte("no_such_field")); got != keyOther {
		t.Errorf("clickKey of an unknown key = %d, want keyOther", got)
	}
}

// Each field, set alone and all together, comes out of the parser (both of its paths) and
// of newClickRecord as it went in.
func TestEveryFieldReachesTheRecord(t *testing.T) {
	clicks := map[string]events.Click{"every field": events.MarkedClick()}
	for f, spec := range events.ClickFields {
		clicks[spec.JSON] = events.MarkedClick(events.ClickField(f))
	}
	for name, c := range clicks {
		want := stored(c)
		data, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		var p clickParser
		if got, err := p.parseClick(data); err != nil || got != want {
			t.Errorf("%s: parsed %+v, %v; want %+v", name, got, err, want)
		}
		sameViaScanAndTree(t, data)
		r := newClickRecord(Click{Click: c})
		if got := r.click(); got != want {
			t.Errorf("%s: newClickRecord holds %+v, want %+v", name, got, want)
		}
	}
}

// The columns ingest inserts are the clicks table's, of the types of the fields' kinds,
// and each field, set alone, reaches its own column.
func TestEveryFieldReachesItsColumn(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, db, conn := chtest.Migrated(t)

	// The columns an INSERT may write: all but those the server computes.
	rows, err := conn.Query(ctx, "SELECT name, type FROM system.columns WHERE database = ? AND table = 'clicks' AND default_kind NOT IN ('MATERIALIZED', 'ALIAS')", db)
	if err != nil {
		t.Fatal(err)
	}
	var table []string
	types := map[string]string{}
	for rows.Next() {
		var name, typ string
		if err := rows.Scan(&name, &typ); err != nil {
			t.Fatal(err)
		}
		table, types[name] = append(table, name), typ
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	_ = rows.Close()
	// In any order: a migration adds a column at the end.
	inserted := strings.Split(clickColumns, ", ")
	slices.Sort(table)
	if slices.Sort(inserted); !slices.Equal(table, inserted) {
		t.Fatalf("clicks has the columns\n%s\ningest inserts\n%s", table, inserted)
	}
	kinds := map[string]events.FieldKind{"String": events.KindString, "LowCardinality(String)": events.KindString,
		"DateTime('UTC')": events.KindTime, "UInt8": events.KindBool}
	for _, f := range columnFields {
		spec := events.ClickFields[f]
		if kind, ok := kinds[types[spec.Column]]; !ok || kind != spec.Kind {
			t.Errorf("column %s is %s, not one for its field's kind %d", spec.Column, types[spec.Column], spec.Kind)
		}
	}

	at := time.Date(2026, 3, 14, 9, 0, 0, 0, time.UTC)
	var written []Click
	for _, f := range columnFields {
		c := Click{Click: events.MarkedClick(f), Partition: int32(f), Offset: int64(f)}
		if f != events.FieldClickID {
			c.ClickID = "clk_" + events.ClickFields[f].JSON
		}
		if f != events.FieldOccurredAt {
			c.OccurredAt = at
		}
		c.OccurredAt = c.OccurredAt.Truncate(time.Second) // a DateTime's precision
		written = append(written, c)
	}
	if res, err := NewWriter(conn, db).WriteClicks(ctx, written); err != nil || res.Written != len(written) {
		t.Fatalf("WriteClicks = %+v, %v", res, err)
	}
	var eventColumns []string
	for _, f := range columnFields {
		eventColumns = append(eventColumns, events.ClickFields[f].Column)
	}
	rows, err = conn.Query(ctx, "SELECT "+strings.Join(eventColumns, ", ")+", kafka_partition, kafka_offset FROM "+db+".clicks ORDER BY kafka_offset")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	i := 0
	for ; rows.Next(); i++ {
		var got Click
		var dest []any
		flags := make([]uint8, events.NumClickFields)
		for _, f := range columnFields {
			if takes[f] == takeBool {
				dest = append(dest, &flags[f])
			} else {
				dest = append(dest, got.Field(f))
			}
		}
		if err := rows.Scan(append(dest, &got.Partition, &got.Offset)...); err != nil {
			t.Fatal(err)
		}
		for f, flag := range flags {
			if flag == 1 {
				*got.Field(events.ClickField(f)).(*bool) = true
			}
		}
		got.OccurredAt = got.OccurredAt.UTC()
		if i >= len(written) {
			continue
		}
		if want := (Click{Click: stored(written[i].Click), Partition: written[i].Partition, Offset: written[i].Offset}); got != want {
			t.Errorf("row %d reads %+v, want %+v", i, got, want)
		}
	}
	if err := rows.Err(); err != nil || i != len(written) {
		t.Fatalf("%d rows read, %d written: %v", i, len(written), err)
	}
}
