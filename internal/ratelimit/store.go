package ratelimit

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Postgres is the Store of an installation: the table rate_limit_counters, shared by every
// api replica.
type Postgres struct{ db *pgxpool.Pool }

// NewPostgres returns the store on db (migrated).
func NewPostgres(db *pgxpool.Pool) *Postgres { return &Postgres{db: db} }

// Add upserts the counts in one statement; the rows are locked in the counts' order. A
// count of 0 only reads its total, without writing (0 when the key has no counter yet).
func (p *Postgres) Add(ctx context.Context, counts []Count) error {
	n := len(counts)
	scopes, keys, starts, ends, adds := make([]string, n), make([]string, n), make([]time.Time, n), make([]time.Time, n), make([]int64, n)
	for i, c := range counts {
		scopes[i], keys[i], starts[i], ends[i], adds[i] = c.Scope, c.Key, c.Start, c.Start.Add(c.Window), c.N
	}
	rows, err := p.db.Query(ctx, `WITH u AS (
			SELECT * FROM unnest($1::text[], $2::text[], $3::timestamptz[], $4::timestamptz[], $5::bigint[]) WITH ORDINALITY AS u(s, k, w, e, n, i)
		), added AS (
			INSERT INTO rate_limit_counters AS c (scope, key, window_start, expires_at, count)
			SELECT s, k, w, e, n FROM u WHERE n > 0 ORDER BY i
			ON CONFLICT (scope, key, window_start) DO UPDATE SET count = c.count + EXCLUDED.count
			RETURNING scope, key, window_start, count
		)
		SELECT scope, key, window_start, count FROM added
		UNION ALL
		SELECT c.scope, c.key, c.window_start, c.count FROM u JOIN rate_limit_counters c
			ON c.scope = u.s AND c.key = u.k AND c.window_start = u.w WHERE u.n = 0`, scopes, keys, starts, ends, adds)
	if err != nil {
		return fmt.Errorf("add rate-limit counts: %w", err)
	}
	type id struct {
		scope, key string
		start      time.Time
	}
	totals := make(map[id]int64, n)
	var (
		r     id
		total int64
	)
	_, err = pgx.ForEachRow(rows, []any{&r.scope, &r.key, &r.start, &total}, func() error {
		totals[id{r.scope, r.key, r.start.UTC()}] = total
		return nil
	})
	if err != nil {
		return fmt.Errorf("add rate-limit counts: %w", err)
	}
	for i := range counts {
		c := &counts[i]
		t, ok := totals[id{c.Scope, c.Key, c.Start.UTC()}]
		if !ok && c.N > 0 {
			return fmt.Errorf("add rate-limit counts: no total came back for %s %q", c.Scope, c.Key)
		}
		c.Total = t
	}
	return nil
}

// Prune deletes the counters of ended windows.
func (p *Postgres) Prune(ctx context.Context, now time.Time) (int64, error) {
	tag, err := p.db.Exec(ctx, `DELETE FROM rate_limit_counters WHERE expires_at < $1`, now)
	if err != nil {
		return 0, fmt.Errorf("prune rate-limit counters: %w", err)
	}
	return tag.RowsAffected(), nil
}

// Memory is a Store in this process only: a budget per replica. It is what an api built
// without Postgres (handler tests) counts in.
type Memory struct {
	mu sync.Mutex
	m  map[memoryKey]memoryCount
}

type memoryKey struct {
	scope, key string
	start      int64 // Unix nanoseconds: time.Time is no map key
}

type memoryCount struct {
	n       int64
	expires time.Time
}

// NewMemory returns an empty in-process store.
func NewMemory() *Memory { return &Memory{m: map[memoryKey]memoryCount{}} }

func (s *Memory) Add(_ context.Context, counts []Count) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range counts {
		c := &counts[i]
		k := memoryKey{c.Scope, c.Key, c.Start.UnixNano()}
		v := s.m[k]
		v.n += c.N
		v.expires = c.Start.Add(c.Window)
		s.m[k] = v
		c.Total = v.n
	}
	if len(s.m) > maxKeys {
		s.prune(counts[0].Start)
	}
	return nil
}

func (s *Memory) Prune(_ context.Context, now time.Time) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.prune(now), nil
}

func (s *Memory) prune(now time.Time) int64 {
	var n int64
	for k, v := range s.m {
		if v.expires.Before(now) {
			delete(s.m, k)
			n++
		}
	}
	return n
}
