package ingest

import (
	"context"
	"fmt"
	"hash/maphash"
	"log/slog"
	"strconv"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/partnerstream/partnerstream/internal/events"
	"github.com/partnerstream/partnerstream/internal/run"
)

// uniqueHours is how many hours of decisions a partition keeps: the current one, the one
// before (clicks a redirect sent just before the hour turned), and two for clicks a
// redirect's spool replays hours late, interleaved with live ones.
const uniqueHours = 4

// uniques decides which clicks of one partition of the clicks topic are duplicates: a click
// is unique when it is its visitor's first on the link in its UTC hour (docs/tracking.md,
// "Unique clicks"). Kafka places clicks by visitor, so the one replica that owns the
// partition sees every click of its visitors and decides them in the partition's order. The
// first time an hour comes up in a generation, the unique clicks earlier owners stored for
// the partition and hour are read back (click_visitors): the decisions are the same whichever
// replica makes them, after a restart, a rebalance or a rollout.
//
// An hour is kept as 64-bit hashes of link and visitor, each to the hash of its unique
// click's id, so a copy of a click (Kafka is at least once) is decided as its first was. Of
// the hours, the least recently used is forgotten for a new one; reading a forgotten hour
// back could miss only decisions not stored yet, and those are seconds old while the hour
// was forgotten after uniqueHours other hours came up.
type uniques struct {
	partition int32
	load      visitorLoader
	log       *slog.Logger
	seed      maphash.Seed
	hours     []uniqueHour
	used      int64 // ticks of the hours' last use
}

type uniqueHour struct {
	hour  int64 // since the Unix epoch
	used  int64
	first map[uint64]uint64
}

// A visitorLoader calls add for every unique click stored for the partition in the hour
// that starts at start.
type visitorLoader func(ctx context.Context, partition int32, start time.Time, add func(link, visitor, clickID string)) error

func newUniques(partition int32, load visitorLoader, log *slog.Logger) *uniques {
	return &uniques{partition: partition, load: load, log: log, seed: maphash.MakeSeed()}
}

// decide sets the click's duplicate flag when it has a visitor; a click without one, from a
// redirect of before visitors, keeps its own. It fails only when ctx ends.
func (u *uniques) decide(ctx context.Context, r *clickRecord) error {
	visitor := r.field(events.FieldVisitor)
	if visitor == "" {
		return nil
	}
	h, err := u.hour(ctx, r.at.Unix()/3600)
	if err != nil {
		return err
	}
	key, id := u.key(r.field(events.FieldLinkID), visitor), u.id(r.field(events.FieldClickID))
	first, ok := h.first[key]
	if !ok {
		h.first[key] = id
	}
	r.bools[events.FieldIsDuplicate] = ok && first != id
	return nil
}

// hour returns the decisions of an hour, read back from ClickHouse if it is not in hand.
func (u *uniques) hour(ctx context.Context, hour int64) (*uniqueHour, error) {
	u.used++
	oldest := 0
	for i := range u.hours {
		if u.hours[i].hour == hour {
			u.hours[i].used = u.used
			return &u.hours[i], nil
		}
		if u.hours[i].used < u.hours[oldest].used {
			oldest = i
		}
	}
	h := uniqueHour{hour: hour, used: u.used, first: map[uint64]uint64{}}
	start := time.Unix(hour*3600, 0).UTC()
	for attempt := 1; ; attempt++ {
		err := u.load(ctx, u.partition, start, func(link, visitor, clickID string) {
			h.first[u.key(link, visitor)] = u.id(clickID)
		})
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		clear(h.first)
		level := slog.LevelDebug
		if attempt == 1 {
			level = slog.LevelWarn
		}
		u.log.Log(ctx, level, "cannot read the unique clicks of an hour; retrying", "partition", u.partition,
			"hour", start, "attempt", attempt, "err", err)
		if !run.Sleep(ctx, run.Backoff(attempt)) {
			return nil, ctx.Err()
		}
	}
	if len(u.hours) < uniqueHours {
		u.hours = append(u.hours, h)
		return &u.hours[len(u.hours)-1], nil
	}
	u.hours[oldest] = h
	return &u.hours[oldest], nil
}

// key hashes a link and a visitor; the zero byte between them keeps ("ab", "c") from
// meeting ("a", "bc").
func (u *uniques) key(link, visitor string) uint64 {
	var h maphash.Hash
	h.SetSeed(u.seed)
	h.WriteString(link)
	h.WriteByte(0)
	h.WriteString(visitor)
	return h.Sum64()
}

func (u *uniques) id(clickID string) uint64 { return maphash.String(u.seed, clickID) }

// loadVisitors reads the unique clicks stored for a partition in the hour that starts at
// start: what a visitorLoader does.
func (w *Writer) loadVisitors(ctx context.Context, partition int32, start time.Time, add func(link, visitor, clickID string)) error {
	rows, err := w.conn.Query(ctx, "SELECT link_id, visitor, click_id FROM "+w.db+".click_visitors WHERE kafka_partition = "+
		strconv.Itoa(int(partition))+" AND hour = toDateTime("+strconv.FormatInt(start.Unix(), 10)+")")
	if err != nil {
		return fmt.Errorf("ingest: read the unique clicks of partition %d at %s: %w", partition, start.Format(time.RFC3339), err)
	}
	defer rows.Close()
	var link, visitor, clickID string
	for rows.Next() {
		if err := rows.Scan(&link, &visitor, &clickID); err != nil {
			return fmt.Errorf("ingest: read the unique clicks of partition %d: %w", partition, err)
		}
		add(link, visitor, clickID)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("ingest: read the unique clicks of partition %d: %w", partition, err)
	}
	return nil
}

func scanStrings(rows driver.Rows) ([]string, error) {
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}
