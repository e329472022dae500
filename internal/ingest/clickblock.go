package ingest

import (
	"context"
	"fmt"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

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
