package ingest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/ext"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/partnerstream/partnerstream/internal/clickid"
	"github.com/partnerstream/partnerstream/internal/events"
	"github.com/partnerstream/partnerstream/internal/money"
	"github.com/partnerstream/partnerstream/internal/timebound"
)

// Click is a click event and where it sat in Kafka (kept on the row for audits and replays).
type Click struct {
	events.Click
	Partition int32
	Offset    int64
}

// Conversion is one state of a conversion, as a conversion.* or commission.status_changed
// event carries it, with the amounts in minor units of Currency.
type Conversion struct {
	EventID      string
	ID           string
	Version      uint64
	Status       string
	Type         string
	Currency     string
	Amount       int64 // the sale amount
	Commission   int64
	OccurredAt   time.Time
	AdvertiserID string
	ProgramID    string
	AffiliateID  string
	LinkID       string
	ClickID      string
	// Sub1 is taken from the event when it carries one, otherwise from the click.
	Sub1         string
	CommissionID string
	ExternalID   string
	Partition    int32
	Offset       int64
	// Published is when ingest read the event from Kafka; zero when it did not come from Kafka.
	Published time.Time

	// Attribution is click, coupon or customer; events from before it existed are click.
	Attribution string
}

// ErrInvalid marks an event ingest cannot store (missing ids, malformed amounts). Such an
// event is logged, counted and skipped: retrying it would block its partition forever.
var ErrInvalid = errors.New("invalid event")

// conversionTypes are the domain events that carry a conversion's state.
var conversionTypes = map[string]bool{
	events.ConversionCreated:       true,
	events.ConversionApproved:      true,
	events.ConversionRejected:      true,
	events.CommissionStatusChanged: true,
}

// ParseConversion reads the conversion state out of a domain event. ok is false for event
// types that carry no conversion (partnership.created), which statistics ignore.
func ParseConversion(e events.Envelope) (c Conversion, ok bool, err error) {
	if !conversionTypes[e.Type] {
		return Conversion{}, false, nil
	}
	// sub1 is not part of the event contract yet; reading it when present lets a producer
	// that adds it spare ingest the click lookup.
	var d struct {
		events.ConversionData
		Sub1 string `json:"sub1"`
	}
	if err := json.Unmarshal(e.Data, &d); err != nil {
		return Conversion{}, true, fmt.Errorf("%w: %s %s: data: %w", ErrInvalid, e.Type, e.ID, err)
	}
	c = Conversion{
		EventID: e.ID, ID: d.ID, Status: d.Status, Type: d.Type, Currency: d.Currency,
		OccurredAt: d.OccurredAt.UTC(), AdvertiserID: first(d.AdvertiserID, e.AdvertiserID),
		ProgramID: first(d.ProgramID, e.ProgramID), AffiliateID: first(d.AffiliateID, e.AffiliateID),
		LinkID: d.LinkID, ClickID: d.ClickID, Sub1: d.Sub1, CommissionID: d.CommissionID, ExternalID: d.ExternalID,
		Attribution: first(d.Attribution, "click"),
	}
	if c.OccurredAt.IsZero() {
		c.OccurredAt = e.OccurredAt.UTC()
	}
	if !timebound.Contains(c.OccurredAt) {
		// Stored before the API refused such times: ClickHouse's DateTime would wrap it onto
		// a day some report reaches. 1970-01-01 is a day no report's range reaches.
		c.OccurredAt = time.Unix(0, 0).UTC()
	}
	switch {
	case c.ID == "" || c.AdvertiserID == "" || c.Status == "":
		return Conversion{}, true, fmt.Errorf("%w: %s %s: conversion id, advertiser id and status are required", ErrInvalid, e.Type, e.ID)
	case d.Version < 0:
		return Conversion{}, true, fmt.Errorf("%w: %s %s: negative version %d", ErrInvalid, e.Type, e.ID, d.Version)
	}
	c.Version = uint64(d.Version)
	if c.Amount, err = parseAmount(d.Amount, d.Currency); err != nil {
		return Conversion{}, true, fmt.Errorf("%w: %s %s: amount: %w", ErrInvalid, e.Type, e.ID, err)
	}
	if c.Commission, err = parseAmount(d.CommissionAmount, d.Currency); err != nil {
		return Conversion{}, true, fmt.Errorf("%w: %s %s: commission amount: %w", ErrInvalid, e.Type, e.ID, err)
	}
	return c, true, nil
}

// parseAmount reads a decimal string; empty means zero (a lead has no sale amount).
func parseAmount(s, currency string) (int64, error) {
	if s == "" {
		if !money.ValidCurrency(currency) {
			return 0, fmt.Errorf("%q: %w", currency, money.ErrCurrency)
		}
		return 0, nil
	}
	return money.Parse(s, currency)
}

func first(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// Writer stores clicks and conversion states in ClickHouse so that writing the same input
// again, in any split into batches, changes no figure: the raw tables feed materialized views
// that sum every row they see, so a duplicate must never reach them. See docs/stats.md.
//
// A write is planned (what is stored is read, and what to insert decided) and then applied
// (inserted). Writes of the same clicks or conversions must not overlap, except that a
// batch may be planned while the batch before it is applied, given that batch's plan: ingest
// pipelines its batches so, consuming each topic partition in order, with every click keyed
// by its id and every conversion event by its conversion id.
type Writer struct {
	conn driver.Conn
	db   string
	now  func() time.Time
	// clickWait is how long a new conversion with a signed click id that is not stored yet
	// holds its batch (Options.ClickWait); zero never holds one.
	clickWait time.Duration

	mu sync.Mutex
	// reachable is when ClickHouse last began answering this writer: its start, or the end of
	// an outage. Clicks stored during neither could not be, so the wait counts from it too.
	reachable time.Time
	down      bool

	blocks reuse[*clickBlock] // inserted blocks, for the next batches
}

// NewWriter returns a writer into database, whose schema chstore.Migrate created. It never
// holds a conversion for its click.
func NewWriter(conn driver.Conn, database string) *Writer {
	return &Writer{conn: conn, db: database, now: time.Now, reachable: time.Now(), blocks: newReuse[*clickBlock](2)}
}

// WriteResult counts what a write did.
type WriteResult struct {
	// Written is the number of clicks inserted, or conversion states applied.
	Written int
	// Duplicates were already stored (a redelivery, a producer's retry) or, for conversions,
	// not newer than the stored version.
	Duplicates int
	// WithoutClick counts new conversions written without the link and sub1 of their click,
	// which was not stored (within the wait, for a signed click id).
	WithoutClick int
}

// A plan is one batch's write, decided against what ClickHouse stores and against the plan
// of the batch before it, which may still be being applied.
type plan interface {
	apply(ctx context.Context) error
	result() WriteResult
}

// write plans and applies, for callers that write one batch at a time.
func write(ctx context.Context, p plan, err error) (WriteResult, error) {
	if err != nil {
		return WriteResult{}, err
	}
	if err := p.apply(ctx); err != nil {
		return WriteResult{}, err
	}
	return p.result(), nil
}

const clickColumns = `click_id, occurred_at, link_id, program_id, affiliate_id, advertiser_id, promotion_id,
	sub1, sub2, sub3, sub4, sub5, ip, user_agent, referrer, country, is_bot, is_duplicate, kafka_partition, kafka_offset`

// WriteClicks inserts the clicks whose ids are not stored yet. A click id seen twice in
// clicks keeps its first occurrence.
func (w *Writer) WriteClicks(ctx context.Context, clicks []Click) (WriteResult, error) {
	recs := make([]clickRecord, len(clicks))
	for i, c := range clicks {
		recs[i] = newClickRecord(c)
	}
	p, err := w.planClicks(ctx, recs, nil)
	return write(ctx, p, err)
}

type clickPlan struct {
	w       *Writer
	block   *clickBlock
	written map[string]bool // every click id of the batch: true for those the block inserts
	res     WriteResult
}

func (p *clickPlan) result() WriteResult { return p.res }

func (p *clickPlan) apply(ctx context.Context) error {
	if p.res.Written == 0 {
		return nil
	}
	if err := p.block.insert(ctx, p.w.conn, p.w.db); err != nil {
		return fmt.Errorf("ingest: insert %d clicks: %w", p.res.Written, err)
	}
	p.w.blocks.put(p.block.reset())
	p.block = nil
	return nil
}

// planClicks looks up which clicks are stored; those prev inserts count as stored.
func (w *Writer) planClicks(ctx context.Context, clicks []clickRecord, prev plan) (plan, error) {
	p := &clickPlan{w: w, written: make(map[string]bool, len(clicks))}
	// first marks the first copy of each click id in the batch; later ones are duplicates.
	// The map grows exactly when an id is new: one hash per click instead of a lookup and an
	// insert, then two lookups and an insert again below (a tenth of ingest's CPU).
	first := make([]bool, len(clicks))
	ids := make([]string, 0, len(clicks))
	for i := range clicks {
		id := clicks[i].field(fClickID)
		n := len(p.written)
		p.written[id] = true
		if len(p.written) > n {
			first[i] = true
			ids = append(ids, id)
		}
	}
	stored := make(map[string]bool)
	if prev, ok := prev.(*clickPlan); ok {
		for _, id := range ids {
			if prev.written[id] {
				stored[id] = true
			}
		}
	}
	err := w.lookup(ctx, "SELECT click_id FROM "+w.db+".click_index WHERE click_id IN _ids", ids, func(rows driver.Rows) error {
		var id string
		if err := rows.Scan(&id); err != nil {
			return err
		}
		stored[id] = true
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("ingest: look up stored clicks: %w", err)
	}
	for id := range stored {
		p.written[id] = false
	}
	p.block = w.clickBlock(len(ids) - len(stored))
	for i := range clicks {
		c := &clicks[i]
		if !first[i] || len(stored) > 0 && stored[c.field(fClickID)] {
			p.res.Duplicates++
			continue
		}
		p.block.add(c)
		p.res.Written++
	}
	return p, nil
}

// clickBlock holds clicks column by column: appending whole columns to the batch costs a
// fraction of appending row by row, which boxes and type-switches every value.
type clickBlock struct {
	id, link, program, affiliate, advertiser, promotion []string
	sub1, sub2, sub3, sub4, sub5                        []string
	ip, userAgent, referrer, country                    []string
	at                                                  []time.Time
	bot, duplicate                                      []uint8
	partition                                           []int32
	offset                                              []int64
}

// newClickBlock returns a block with room for n clicks: growing twenty columns click by click
// cost ingest a tenth of its CPU in copies.
func newClickBlock(n int) *clickBlock {
	str := func() []string { return make([]string, 0, n) }
	return &clickBlock{id: str(), link: str(), program: str(), affiliate: str(), advertiser: str(), promotion: str(),
		sub1: str(), sub2: str(), sub3: str(), sub4: str(), sub5: str(), ip: str(), userAgent: str(), referrer: str(),
		country: str(), at: make([]time.Time, 0, n), bot: make([]uint8, 0, n), duplicate: make([]uint8, 0, n),
		partition: make([]int32, 0, n), offset: make([]int64, 0, n)}
}

// clickBlock returns an empty block with room for n clicks, one inserted before if it has
// the room.
func (w *Writer) clickBlock(n int) *clickBlock {
	if b := w.blocks.get(); b != nil && cap(b.id) >= n {
		return b
	}
	return newClickBlock(n)
}

// reset empties the block for reuse.
func (b *clickBlock) reset() *clickBlock {
	for _, col := range []*[]string{&b.id, &b.link, &b.program, &b.affiliate, &b.advertiser, &b.promotion,
		&b.sub1, &b.sub2, &b.sub3, &b.sub4, &b.sub5, &b.ip, &b.userAgent, &b.referrer, &b.country} {
		clear(*col) // the clicks' strings must not outlive their batch
		*col = (*col)[:0]
	}
	b.at, b.bot, b.duplicate, b.partition, b.offset = b.at[:0], b.bot[:0], b.duplicate[:0], b.partition[:0], b.offset[:0]
	return b
}

func (b *clickBlock) add(c *clickRecord) {
	b.id, b.at, b.link = append(b.id, c.field(fClickID)), append(b.at, c.at.UTC()), append(b.link, c.field(fLinkID))
	b.program, b.affiliate = append(b.program, c.field(fProgramID)), append(b.affiliate, c.field(fAffiliateID))
	b.advertiser, b.promotion = append(b.advertiser, c.field(fAdvertiserID)), append(b.promotion, c.field(fPromotionID))
	b.sub1, b.sub2, b.sub3 = append(b.sub1, c.field(fSub1)), append(b.sub2, c.field(fSub2)), append(b.sub3, c.field(fSub3))
	b.sub4, b.sub5 = append(b.sub4, c.field(fSub4)), append(b.sub5, c.field(fSub5))
	b.ip, b.userAgent, b.referrer = append(b.ip, c.field(fIP)), append(b.userAgent, c.field(fUserAgent)), append(b.referrer, c.field(fReferrer))
	b.country, b.bot, b.duplicate = append(b.country, c.field(fCountry)), append(b.bot, flag(c.bot)), append(b.duplicate, flag(c.dup))
	b.partition, b.offset = append(b.partition, c.partition), append(b.offset, c.offset)
}

// insert sends the block as one INSERT of blocks of insertChunk rows; its columns are in
// clickColumns order.
func (b *clickBlock) insert(ctx context.Context, conn driver.Conn, db string) error {
	batch, err := conn.PrepareBatch(ctx, "INSERT INTO "+db+".clicks ("+clickColumns+")")
	if err != nil {
		return err
	}
	defer func() { _ = batch.Close() }()
	for from := 0; from < len(b.id); from += insertChunk {
		to := min(from+insertChunk, len(b.id))
		if from > 0 {
			if err := batch.Flush(); err != nil {
				return err
			}
		}
		columns := []any{b.id[from:to], b.at[from:to], b.link[from:to], b.program[from:to], b.affiliate[from:to],
			b.advertiser[from:to], b.promotion[from:to], b.sub1[from:to], b.sub2[from:to], b.sub3[from:to],
			b.sub4[from:to], b.sub5[from:to], b.ip[from:to], b.userAgent[from:to], b.referrer[from:to],
			b.country[from:to], b.bot[from:to], b.duplicate[from:to], b.partition[from:to], b.offset[from:to]}
		for i, col := range columns {
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

func flag(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}

// storedConversion is what a conversion's figures currently count, from the conversions
// table.
type storedConversion struct {
	Conversion
	found bool
}

const conversionColumns = `conversion_id, version, status, type, currency, amount, commission, occurred_at,
	advertiser_id, program_id, affiliate_id, link_id, click_id, sub1, commission_id, external_id, attribution`

// WriteConversions applies each conversion's newest state in convs that is newer than the
// stored one: it retracts what the stored state counted (a sign -1 row) and adds the new
// state (sign +1), in one insert. Anything not newer is a duplicate and writes nothing.
func (w *Writer) WriteConversions(ctx context.Context, convs []Conversion) (WriteResult, error) {
	p, err := w.planConversions(ctx, convs, nil)
	return write(ctx, p, err)
}

type conversionPlan struct {
	w       *Writer
	rows    []conversionRow
	written map[string]Conversion // conversion id -> the state this plan stores
	res     WriteResult
}

// conversionRow is a state counted (sign +1) or retracted (-1) because of the event of cause.
type conversionRow struct {
	state, cause Conversion
	sign         int8
}

func (p *conversionPlan) result() WriteResult { return p.res }

func (p *conversionPlan) apply(ctx context.Context) error {
	if len(p.rows) == 0 {
		return nil
	}
	batch, err := p.w.conn.PrepareBatch(ctx, "INSERT INTO "+p.w.db+".conversion_changes ("+conversionColumns+
		", sign, event_id, kafka_partition, kafka_offset, ingested_at)")
	if err != nil {
		return fmt.Errorf("ingest: prepare conversions insert: %w", err)
	}
	defer func() { _ = batch.Close() }()
	now := p.w.now().UTC()
	for _, r := range p.rows {
		if err := appendConversion(batch, r.state, r.sign, r.cause, now); err != nil {
			return err
		}
	}
	if err := batch.Send(); err != nil {
		return fmt.Errorf("ingest: insert %d conversion changes: %w", p.res.Written, err)
	}
	return nil
}

// planConversions reads the stored state of each conversion; a state prev stores counts as
// the stored one.
func (w *Writer) planConversions(ctx context.Context, convs []Conversion, prev plan) (plan, error) {
	p := &conversionPlan{w: w, written: map[string]Conversion{}}
	newest := make(map[string]int, len(convs)) // conversion id -> index in convs
	var ids []string
	for i, c := range convs {
		j, ok := newest[c.ID]
		switch {
		case !ok:
			newest[c.ID] = i
			ids = append(ids, c.ID)
		case c.Version > convs[j].Version:
			newest[c.ID] = i
			p.res.Duplicates++
		default:
			p.res.Duplicates++
		}
	}
	stored, err := w.storedConversions(ctx, ids)
	if err != nil {
		return nil, err
	}
	if prev, ok := prev.(*conversionPlan); ok {
		for id, c := range prev.written {
			if _, ok := newest[id]; ok && (!stored[id].found || c.Version > stored[id].Version) {
				stored[id] = storedConversion{Conversion: c, found: true}
			}
		}
	}
	if p.res.WithoutClick, err = w.attribute(ctx, convs, newest, stored); err != nil {
		return nil, err
	}
	for _, id := range ids {
		c := convs[newest[id]]
		s := stored[id]
		if s.found && c.Version <= s.Version {
			p.res.Duplicates++
			continue
		}
		if s.found {
			// The retraction carries the event that caused it, for audits.
			p.rows = append(p.rows, conversionRow{state: s.Conversion, cause: c, sign: -1})
		}
		p.rows = append(p.rows, conversionRow{state: c, cause: c, sign: 1})
		p.written[id] = c
		p.res.Written++
	}
	return p, nil
}

func appendConversion(batch driver.Batch, c Conversion, sign int8, cause Conversion, now time.Time) error {
	err := batch.Append(c.ID, c.Version, c.Status, c.Type, c.Currency, c.Amount, c.Commission, c.OccurredAt.UTC(),
		c.AdvertiserID, c.ProgramID, c.AffiliateID, c.LinkID, c.ClickID, c.Sub1, c.CommissionID, c.ExternalID, c.Attribution,
		sign, cause.EventID, cause.Partition, cause.Offset, now)
	if err != nil {
		return fmt.Errorf("ingest: append conversion %s: %w", c.ID, err)
	}
	return nil
}

// storedConversions reads the newest stored state of each conversion. It takes the highest
// version itself rather than relying on FINAL, because the engine collapses versions only
// when it merges.
func (w *Writer) storedConversions(ctx context.Context, ids []string) (map[string]storedConversion, error) {
	stored := make(map[string]storedConversion, len(ids))
	err := w.lookup(ctx, "SELECT "+conversionColumns+" FROM "+w.db+".conversions WHERE conversion_id IN _ids", ids, func(rows driver.Rows) error {
		var c Conversion
		if err := rows.Scan(&c.ID, &c.Version, &c.Status, &c.Type, &c.Currency, &c.Amount, &c.Commission, &c.OccurredAt,
			&c.AdvertiserID, &c.ProgramID, &c.AffiliateID, &c.LinkID, &c.ClickID, &c.Sub1, &c.CommissionID, &c.ExternalID, &c.Attribution); err != nil {
			return err
		}
		if s, ok := stored[c.ID]; !ok || c.Version > s.Version {
			stored[c.ID] = storedConversion{Conversion: c, found: true}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("ingest: look up stored conversions: %w", err)
	}
	return stored, nil
}

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

// reachableSince is when ClickHouse last began answering.
func (w *Writer) reachableSince() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.reachable
}

// answered records whether ClickHouse answered a query, to date the end of an outage.
func (w *Writer) answered(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case err != nil:
		w.down = true
	case w.down:
		w.down, w.reachable = false, w.now()
	}
}

// lookup runs query with ids as the external table _ids (one String column, click_id or
// conversion_id by position). An external table rather than an IN list because ten thousand
// ids would exceed the server's max_query_size; the primary key still prunes the read.
func (w *Writer) lookup(ctx context.Context, query string, ids []string, scan func(driver.Rows) error) error {
	if len(ids) == 0 {
		return nil
	}
	tbl, err := ext.NewTable("_ids", ext.Column("id", "String"))
	if err != nil {
		return err
	}
	// The whole column at once: Table.Append takes a row of values as interfaces, which
	// allocated one for each id.
	if _, err := tbl.Block().Columns[0].Append(ids); err != nil {
		return err
	}
	rows, err := w.conn.Query(clickhouse.Context(ctx, clickhouse.WithExternalTable(tbl)), query)
	w.answered(err)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := scan(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}
