package ingest

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/partnerstream/partnerstream/internal/run"
)

// retention drops, hourly, what ClickHouse 18.16 cannot expire by itself (it has no TTL):
// the days of click_visitors before yesterday (only the hours around now are read back), and,
// when the operator set a period, the months of raw rows older than it. Every replica runs
// it; dropping a partition twice changes nothing.
type retention struct {
	w      *Writer
	months int // 0: raw rows are kept for ever
	log    *slog.Logger
}

// rawTables are the tables partitioned by month whose old rows nothing reads back: the
// statistics come from the rollups, which are kept, and a conversion's stored state from
// `conversions`, which is not partitioned. A conversion arriving after its click's month was
// dropped is stored without the click's sub1, as when the click never arrived.
var rawTables = []string{"clicks", "clicks_narrow", "click_index", "conversion_changes", "conversions_awaiting_click"}

func (r retention) run(ctx context.Context) error {
	run.Every(ctx, time.Hour, r.log, "ClickHouse retention", r.drop)
	return nil
}

func (retention) check() error { return nil }

func (r retention) drop(ctx context.Context) error {
	now := r.w.now().UTC()
	if err := r.dropBefore(ctx, "click_visitors", now.AddDate(0, 0, -1).Format("20060102")); err != nil {
		return err
	}
	if r.months <= 0 {
		return nil
	}
	first := rawCutoff(now, r.months)
	for _, table := range rawTables {
		if err := r.dropBefore(ctx, table, first.Format("200601")); err != nil {
			return err
		}
	}
	return nil
}

// rawCutoff is the first month kept: the current one and the months before it.
func rawCutoff(now time.Time, months int) time.Time {
	y, m, _ := now.Date()
	return time.Date(y, m-time.Month(months), 1, 0, 0, 0, 0, time.UTC)
}

// dropBefore drops the partitions of table whose id sorts before the given one
// (ids are toYYYYMMDD or toYYYYMM of the partitioning column, so they sort by time).
func (r retention) dropBefore(ctx context.Context, table, before string) error {
	w := r.w
	rows, err := w.conn.Query(ctx, "SELECT DISTINCT partition FROM system.parts WHERE database = ? AND table = ? AND active AND partition < ?",
		w.db, table, before)
	if err != nil {
		return fmt.Errorf("ingest: list the partitions of %s: %w", table, err)
	}
	parts, err := scanStrings(rows)
	if err != nil {
		return fmt.Errorf("ingest: list the partitions of %s: %w", table, err)
	}
	for _, p := range parts {
		if err := w.conn.Exec(ctx, "ALTER TABLE "+w.db+"."+table+" DROP PARTITION "+p); err != nil {
			return fmt.Errorf("ingest: drop partition %s of %s: %w", p, table, err)
		}
		r.log.Info("dropped a partition past its retention", "table", table, "partition", p)
	}
	return nil
}
