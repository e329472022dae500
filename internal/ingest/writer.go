package ingest

import (
	"context"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/ext"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

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

	blocks reuse[*clickBlock] // inserted blocks, for the next batches
	// awaited tells this replica's click watcher that a conversion now awaits its click.
	awaited chan struct{}
}

// NewWriter returns a writer into database, whose schema chstore.Migrate created.
func NewWriter(conn driver.Conn, database string) *Writer {
	return &Writer{conn: conn, db: database, now: time.Now, blocks: newReuse[*clickBlock](2), awaited: make(chan struct{}, 1)}
}

// WriteResult counts what a write did.
type WriteResult struct {
	// Written is the number of clicks inserted, or conversion states applied.
	Written int
	// Duplicates were already stored (a redelivery, a producer's retry) or, for conversions,
	// not newer than the stored version.
	Duplicates int
	// WithoutClick counts new conversions written without the link and sub1 of their click,
	// which was not stored.
	WithoutClick int
	// Moved counts conversions moved to the link and sub1 of a click stored after them.
	Moved int
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
