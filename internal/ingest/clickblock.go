package ingest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/partnerstream/partnerstream/internal/enrich"
	"github.com/partnerstream/partnerstream/internal/events"
)

// clickBlock holds the clicks of one INSERT, which hands them to the driver column by column:
// appending whole columns to the batch costs a fraction of appending row by row, which boxes
// and type-switches every value. The columns are filled insertChunk rows at a time, field by
// field (columnFields), into buffers the chunks share.
type clickBlock struct {
	recs      []clickRecord
	strs      [events.NumClickFields][]string // by field, for the string fields
	flags     [events.NumClickFields][]uint8  // by field, for the bool fields
	at        []time.Time
	derived   [len(derivedStrings)][]string // by derivedStrings
	asn       []uint32
	hosting   []uint8
	partition []int32
	offset    []int64
	columns   []any
}

// columnFields are the fields ingest stores, in clickColumns order.
var columnFields = func() (fields []events.ClickField) {
	for f := range events.NumClickFields {
		if takes[f] != skip && takes[f] != takeInput {
			fields = append(fields, f)
		}
	}
	return fields
}()

// clickColumns are the columns of clicks a block inserts: the events' fields, what ingest
// derives (enrichedColumns) and the Kafka position.
var clickColumns = func() string {
	var cols []string
	for _, f := range columnFields {
		cols = append(cols, events.ClickFields[f].Column)
	}
	cols = append(cols, enrichedColumns...)
	return strings.Join(append(cols, "kafka_partition", "kafka_offset"), ", ")
}()

// derivedString is a String column that enrichment fills (internal/enrich, migrations 0009 and 0014).
type derivedString struct {
	column string
	value  func(r *clickRecord) string
}

// derivedStrings are the String columns enrichment fills, in clickColumns order; asn and
// hosting follow them. A function per column rather than a table walked by reflection: the
// block calls it once per click and column.
var derivedStrings = [...]derivedString{
	{"region", func(r *clickRecord) string { return r.localPlace().Region }},
	{"city", func(r *clickRecord) string { return r.localPlace().City }},
	{"as_org", func(r *clickRecord) string { return r.network().Org }},
	{"device_type", (*clickRecord).deviceType},
	{"browser", func(r *clickRecord) string { return r.device().Browser }},
	{"os", func(r *clickRecord) string { return r.device().OS }},
	{"referrer_domain", func(r *clickRecord) string { return r.referrer().Domain }},
	{"utm_source", func(r *clickRecord) string { return r.utm().Source }},
	{"utm_medium", func(r *clickRecord) string { return r.utm().Medium }},
	{"utm_campaign", func(r *clickRecord) string { return r.utm().Campaign }},
	{"paid_ads", func(r *clickRecord) string { return r.utm().PaidAds }},
}

var enrichedColumns = func() (cols []string) {
	for _, d := range derivedStrings {
		cols = append(cols, d.column)
	}
	return append(cols, "asn", "hosting")
}()

// newClickBlock returns a block with room for n clicks: growing it click by click cost ingest
// a tenth of its CPU in copies.
func newClickBlock(n int) *clickBlock { return &clickBlock{recs: make([]clickRecord, 0, n)} }

// clickBlock returns an empty block with room for n clicks, one inserted before if it has
// the room.
func (w *Writer) clickBlock(n int) *clickBlock {
	if b := w.blocks.get(); b != nil && cap(b.recs) >= n {
		return b
	}
	return newClickBlock(n)
}

// reset empties the block for reuse.
func (b *clickBlock) reset() *clickBlock {
	clear(b.recs) // the clicks' strings must not outlive their batch
	b.recs = b.recs[:0]
	for _, col := range b.strs {
		clear(col)
	}
	for _, col := range b.derived {
		clear(col)
	}
	return b
}

func (b *clickBlock) add(c *clickRecord) { b.recs = append(b.recs, *c) }

// chunk fills the columns with recs, in clickColumns order.
func (b *clickBlock) chunk(recs []clickRecord) []any {
	n := len(recs)
	b.columns = b.columns[:0]
	for _, f := range columnFields {
		switch takes[f] {
		case takeString:
			col := slices.Grow(b.strs[f][:0], n)[:n]
			switch f {
			case events.FieldIP:
				for i := range col {
					col[i] = recs[i].storedIP()
				}
			case events.FieldCountry:
				for i := range col {
					col[i] = recs[i].country()
				}
			default:
				for i := range col {
					col[i] = recs[i].field(f)
				}
			}
			b.strs[f], b.columns = col, append(b.columns, col)
		case takeTime:
			b.at = slices.Grow(b.at[:0], n)[:n]
			for i := range b.at {
				b.at[i] = recs[i].at.UTC()
			}
			b.columns = append(b.columns, b.at)
		case takeBool:
			col := slices.Grow(b.flags[f][:0], n)[:n]
			for i := range col {
				col[i] = flag(recs[i].bools[f])
			}
			b.flags[f], b.columns = col, append(b.columns, col)
		}
	}
	for d, spec := range derivedStrings {
		col := slices.Grow(b.derived[d][:0], n)[:n]
		for i := range col {
			col[i] = spec.value(&recs[i])
		}
		b.derived[d], b.columns = col, append(b.columns, col)
	}
	b.asn, b.hosting = slices.Grow(b.asn[:0], n)[:n], slices.Grow(b.hosting[:0], n)[:n]
	for i := range recs {
		nw := recs[i].network()
		b.asn[i], b.hosting[i] = nw.ASN, flag(nw.Hosting)
	}
	b.columns = append(b.columns, b.asn, b.hosting)
	b.partition, b.offset = slices.Grow(b.partition[:0], n)[:n], slices.Grow(b.offset[:0], n)[:n]
	for i := range recs {
		b.partition[i], b.offset[i] = recs[i].partition, recs[i].offset
	}
	return append(b.columns, b.partition, b.offset)
}

// insert sends the block as one INSERT of blocks of insertChunk rows.
func (b *clickBlock) insert(ctx context.Context, conn driver.Conn, db string) error {
	batch, err := conn.PrepareBatch(ctx, "INSERT INTO "+db+".clicks ("+clickColumns+")")
	if err != nil {
		return err
	}
	defer func() { _ = batch.Close() }()
	for from := 0; from < len(b.recs); from += insertChunk {
		if from > 0 {
			if err := batch.Flush(); err != nil {
				return err
			}
		}
		for i, col := range b.chunk(b.recs[from:min(from+insertChunk, len(b.recs))]) {
			if err := batch.Column(i).Append(col); err != nil {
				return fmt.Errorf("column %d: %w", i, err)
			}
		}
	}
	return batch.Send()
}

// insertChunk is how many clicks the insert hands the driver at a time: its columns grow
// from nothing for every INSERT, and growing them to a whole batch copied each string column
// over and over (a fifth of ingest's CPU); Flush sends the rows in hand and keeps the
// columns' room for the next ones. ClickHouse squashes the blocks of one INSERT into one
// (min_insert_block_size_rows), so a batch still makes one part per table.
const insertChunk = 2048

// Enrichment's parts of a record, or their zero value when enrichment found nothing (or did
// not run: Writer.WriteClicks of clicks given without it).
var (
	noPlace    enrich.Place
	noNetwork  enrich.Network
	noDevice   enrich.Device
	noReferrer enrich.Referrer
	noUTM      enrich.UTM
)

func (r *clickRecord) place() *enrich.Place {
	if a := r.enriched.Address; a != nil {
		return orZero(a.Place, &noPlace)
	}
	return &noPlace
}

// localPlace is the place of the address, unless the event names another country: a region
// and city are only stored beside their own country.
func (r *clickRecord) localPlace() *enrich.Place {
	if p, c := r.place(), r.field(events.FieldCountry); c == "" || c == p.Country {
		return p
	}
	return &noPlace
}

func (r *clickRecord) network() *enrich.Network {
	if a := r.enriched.Address; a != nil {
		return orZero(a.Network, &noNetwork)
	}
	return &noNetwork
}

func (r *clickRecord) device() *enrich.Device { return orZero(r.enriched.Device, &noDevice) }

// deviceType is the device's type, bot for a click the redirect flagged as one (its list of
// crawlers, link previewers and HTTP tools is longer than the user-agent parser's).
func (r *clickRecord) deviceType() string {
	if r.bools[events.FieldIsBot] {
		return enrich.DeviceBot
	}
	return r.device().Type
}

func (r *clickRecord) referrer() *enrich.Referrer { return orZero(r.enriched.Referrer, &noReferrer) }

func (r *clickRecord) utm() *enrich.UTM { return orZero(r.enriched.UTM, &noUTM) }

// orZero is p, or zero when enrichment found nothing.
func orZero[T any](p, zero *T) *T {
	if p != nil {
		return p
	}
	return zero
}

// storedIP is the address as ClickHouse keeps it: as enrichment made it (truncated unless the
// operator keeps it whole), as recorded when enrichment did not run.
func (r *clickRecord) storedIP() string {
	if a := r.enriched.Address; a != nil {
		return a.Stored
	}
	return r.field(events.FieldIP)
}

// country is the event's country when it has one, else the geo database's.
func (r *clickRecord) country() string {
	if c := r.field(events.FieldCountry); c != "" {
		return c
	}
	return r.place().Country
}

func flag(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}
