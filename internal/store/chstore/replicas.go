package chstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// Replicas is the connection to a replicated ClickHouse (Config.Cluster): every query goes to
// one replica, the first of the configured addresses that answers, and stays there until it
// fails. A process thus reads what it wrote (an insert is visible on the replica that took it
// as soon as it returns), which ingest's read-before-write needs (docs/stats.md, "A replicated
// ClickHouse"). Before it first serves a query from a replica, after start or after moving to
// the next one, it waits until that replica holds every part written anywhere before then
// (CatchUp): the writes this process made through the replica it left included.
type Replicas struct {
	addrs    []string
	conns    []driver.Conn
	database string
	cluster  string

	mu      sync.Mutex
	current int
	caught  bool // current has caught up since it became current
}

// catchUpPoll is how often CatchUp looks at the replication queue while it waits.
const catchUpPoll = 50 * time.Millisecond

func openReplicas(ctx context.Context, cfg Config, addrs []string) (*Replicas, error) {
	r := &Replicas{addrs: addrs, database: cfg.Database, cluster: cfg.Cluster}
	for _, a := range addrs {
		conn, err := clickhouse.Open(&clickhouse.Options{
			Addr:        []string{a},
			Auth:        clickhouse.Auth{Database: "default", Username: cfg.Username, Password: cfg.Password},
			DialTimeout: connectTimeout,
		})
		if err != nil {
			_ = r.Close()
			return nil, fmt.Errorf("clickhouse: open %s: %w", a, err)
		}
		r.conns = append(r.conns, conn)
	}
	if err := ping(ctx, r); err != nil {
		_ = r.Close()
		return nil, fmt.Errorf("clickhouse: connect to any of %s: %w", cfg.Addr, err)
	}
	return r, nil
}

// Cluster names the cluster the connection's DDL runs on.
func (r *Replicas) Cluster() string { return r.cluster }

// Replica is the address queries go to now.
func (r *Replicas) Replica() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.addrs[r.current]
}

// do runs f on the current replica, moving on to the next one (and catching it up) when the
// current one cannot be reached, until each has been tried once.
func (r *Replicas) do(ctx context.Context, f func(driver.Conn) error) error {
	var errs []error
	for range r.conns {
		i, conn, err := r.use(ctx)
		if err == nil {
			err = f(conn)
		}
		if err == nil || !unreachable(err) || ctx.Err() != nil {
			return err
		}
		errs = append(errs, fmt.Errorf("%s: %w", r.addrs[i], err))
		r.failed(i)
	}
	return fmt.Errorf("clickhouse: no replica answers: %w", errors.Join(errs...))
}

// use returns the current replica, caught up.
func (r *Replicas) use(ctx context.Context) (int, driver.Conn, error) {
	r.mu.Lock()
	i, caught := r.current, r.caught
	r.mu.Unlock()
	conn := r.conns[i]
	if caught {
		return i, conn, nil
	}
	if err := catchUp(ctx, conn, r.database); err != nil {
		return i, conn, err
	}
	r.mu.Lock()
	if r.current == i {
		r.caught = true
	}
	r.mu.Unlock()
	return i, conn, nil
}

// failed moves on from replica i, unless another call did already.
func (r *Replicas) failed(i int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.current == i {
		r.current = (i + 1) % len(r.conns)
		r.caught = false
	}
}

// unreachable tells a replica that cannot be reached (refused, reset, timed out, gone) from
// one that answered with an error, which another replica would answer alike.
func unreachable(err error) bool {
	var ex *clickhouse.Exception
	if errors.As(err, &ex) {
		return false
	}
	var opErr *net.OpError
	return errors.As(err, &opErr) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, clickhouse.ErrAcquireConnTimeout)
}

// CatchUp waits until the replica conn reads from holds every part that any replica had
// acknowledged when CatchUp began: for a Replicas connection, its current replica; for a
// connection to one server, there is nothing to wait for. Ingest calls it when it takes over
// Kafka partitions, whose previous owner may have written through another replica. It waits
// while a part it lacks cannot be fetched (the replica that has it is down): reading without
// it could count its rows twice.
func CatchUp(ctx context.Context, conn driver.Conn) error {
	r, ok := conn.(*Replicas)
	if !ok {
		return nil
	}
	return r.do(ctx, func(c driver.Conn) error { return catchUp(ctx, c, r.database) })
}

// catchUp: an insert into a replicated table is acknowledged once its part is in ZooKeeper's
// log of the table, so the entries up to each log's last index are every acknowledged write.
// The replica has them once it has pulled the log past that index into its queue, and
// executed every fetch (GET_PART) queued for an entry created by then. Merges are not waited
// for (SYSTEM SYNC REPLICA would wait for them too, minutes on large parts): they move rows
// between parts the replica has.
func catchUp(ctx context.Context, conn driver.Conn, database string) error {
	var since time.Time
	if err := conn.QueryRow(ctx, "SELECT now()").Scan(&since); err != nil {
		return fmt.Errorf("clickhouse: catch up: %w", err)
	}
	target, err := logPositions(ctx, conn, database, "log_max_index")
	if err != nil {
		return err
	}
	empty, err := emptyLogs(ctx, conn, database, target)
	if err != nil {
		return err
	}
	// Entries are stamped by the clock of the server that wrote them: allow for a few seconds
	// between the servers' clocks.
	until := since.Add(5 * time.Second)
	for {
		pulled, err := logPositions(ctx, conn, database, "log_pointer")
		if err != nil {
			return err
		}
		behind := ""
		for table, last := range target {
			if !empty[table] && pulled[table] <= last {
				behind = table
				break
			}
		}
		if behind == "" {
			var fetches uint64
			// As seconds since the epoch: a DateTime bound as text would be read in the
			// server's time zone.
			if err := conn.QueryRow(ctx, "SELECT count() FROM system.replication_queue WHERE database = ? AND type = 'GET_PART' AND create_time <= toDateTime("+
				strconv.FormatInt(until.Unix(), 10)+")", database).Scan(&fetches); err != nil {
				return fmt.Errorf("clickhouse: catch up: read the replication queue: %w", err)
			}
			if fetches == 0 {
				return nil
			}
			behind = fmt.Sprintf("%d parts to fetch", fetches)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("clickhouse: catch up with the other replicas (%s): %w", behind, ctx.Err())
		case <-time.After(catchUpPoll):
		}
	}
}

// logPositions reads a column of system.replicas by table: log_max_index (the last entry of
// the table's log in ZooKeeper) or log_pointer (the next entry this replica will pull).
func logPositions(ctx context.Context, conn driver.Conn, database, column string) (map[string]uint64, error) {
	rows, err := conn.Query(ctx, "SELECT table, "+column+" FROM system.replicas WHERE database = ?", database)
	if err != nil {
		return nil, fmt.Errorf("clickhouse: catch up: read system.replicas: %w", err)
	}
	defer rows.Close()
	out := map[string]uint64{}
	for rows.Next() {
		var table string
		var v uint64
		if err := rows.Scan(&table, &v); err != nil {
			return nil, fmt.Errorf("clickhouse: catch up: read system.replicas: %w", err)
		}
		out[table] = v
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("clickhouse: catch up: read system.replicas: %w", err)
	}
	return out, nil
}

// emptyLogs finds, among the tables whose last log index reads 0, those whose log holds no
// entry at all (0 is also the index of a first entry).
func emptyLogs(ctx context.Context, conn driver.Conn, database string, target map[string]uint64) (map[string]bool, error) {
	empty := map[string]bool{}
	for table, last := range target {
		if last != 0 {
			continue
		}
		var path string
		if err := conn.QueryRow(ctx, "SELECT zookeeper_path FROM system.replicas WHERE database = ? AND table = ?", database, table).Scan(&path); err != nil {
			return nil, fmt.Errorf("clickhouse: catch up: read the ZooKeeper path of %s: %w", table, err)
		}
		var entries uint64
		// system.zookeeper takes its path as a literal only.
		if err := conn.QueryRow(ctx, "SELECT count() FROM system.zookeeper WHERE path = '"+escapeLiteral(path+"/log")+"'").Scan(&entries); err != nil {
			return nil, fmt.Errorf("clickhouse: catch up: read the log of %s: %w", table, err)
		}
		empty[table] = entries == 0
	}
	return empty, nil
}

func escapeLiteral(s string) string {
	out := make([]byte, 0, len(s))
	for i := range len(s) {
		if s[i] == '\'' || s[i] == '\\' {
			out = append(out, '\\')
		}
		out = append(out, s[i])
	}
	return string(out)
}

// The driver.Conn methods, each on the current replica.

func (r *Replicas) Contributors() []string { return r.conns[0].Contributors() }

func (r *Replicas) ServerVersion() (v *driver.ServerVersion, err error) {
	err = r.do(context.Background(), func(c driver.Conn) error {
		v, err = c.ServerVersion()
		return err
	})
	return v, err
}

func (r *Replicas) Select(ctx context.Context, dest any, query string, args ...any) error {
	return r.do(ctx, func(c driver.Conn) error { return c.Select(ctx, dest, query, args...) })
}

func (r *Replicas) Query(ctx context.Context, query string, args ...any) (rows driver.Rows, err error) {
	err = r.do(ctx, func(c driver.Conn) error {
		rows, err = c.Query(ctx, query, args...)
		return err
	})
	return rows, err
}

func (r *Replicas) QueryRow(ctx context.Context, query string, args ...any) driver.Row {
	var row driver.Row
	err := r.do(ctx, func(c driver.Conn) error {
		row = c.QueryRow(ctx, query, args...)
		return row.Err()
	})
	if row == nil {
		return errRow{err}
	}
	return row
}

func (r *Replicas) PrepareBatch(ctx context.Context, query string, opts ...driver.PrepareBatchOption) (driver.Batch, error) {
	var b driver.Batch
	var at int
	err := r.do(ctx, func(c driver.Conn) error {
		var err error
		b, err = c.PrepareBatch(ctx, query, opts...)
		at = slices.Index(r.conns, c)
		return err
	})
	if err != nil {
		return nil, err
	}
	return &replicaBatch{Batch: b, r: r, at: at}, nil
}

func (r *Replicas) Exec(ctx context.Context, query string, args ...any) error {
	return r.do(ctx, func(c driver.Conn) error { return c.Exec(ctx, query, args...) })
}

func (r *Replicas) QueryFormat(ctx context.Context, format, query string, args ...any) (rc io.ReadCloser, err error) {
	err = r.do(ctx, func(c driver.Conn) error {
		rc, err = c.QueryFormat(ctx, format, query, args...)
		return err
	})
	return rc, err
}

// InsertFormat is not retried on another replica: data may have been read already.
func (r *Replicas) InsertFormat(ctx context.Context, format, query string, data io.Reader) error {
	i, c, err := r.use(ctx)
	if err == nil {
		if err = c.InsertFormat(ctx, format, query, data); err != nil && unreachable(err) {
			r.failed(i)
		}
	}
	return err
}

// AsyncInsert is refused: the project inserts through PrepareBatch only (docs/architecture.md,
// "The ClickHouse SQL subset"), and the driver deprecates it.
func (r *Replicas) AsyncInsert(context.Context, string, bool, ...any) error {
	return errors.New("clickhouse: AsyncInsert is not supported; insert through PrepareBatch")
}

// Ping answers whether the current replica (or the next one that answers) is up; it does not
// wait for a replica to catch up, so a readiness probe does not hang on replication.
func (r *Replicas) Ping(ctx context.Context) error {
	var errs []error
	for range r.conns {
		r.mu.Lock()
		i := r.current
		r.mu.Unlock()
		err := r.conns[i].Ping(ctx)
		if err == nil || !unreachable(err) || ctx.Err() != nil {
			return err
		}
		errs = append(errs, fmt.Errorf("%s: %w", r.addrs[i], err))
		r.failed(i)
	}
	return fmt.Errorf("clickhouse: no replica answers: %w", errors.Join(errs...))
}

func (r *Replicas) Stats() driver.Stats {
	var s driver.Stats
	for _, c := range r.conns {
		cs := c.Stats()
		s.Open += cs.Open
		s.Idle += cs.Idle
		s.MaxOpenConns += cs.MaxOpenConns
		s.MaxIdleConns += cs.MaxIdleConns
	}
	return s
}

func (r *Replicas) Close() error {
	var errs []error
	for _, c := range r.conns {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

// replicaBatch moves its connection on from a replica that fails while the batch is sent; the
// caller retries the batch, planning it again against the next replica.
type replicaBatch struct {
	driver.Batch
	r  *Replicas
	at int
}

func (b *replicaBatch) Send() error {
	err := b.Batch.Send()
	if err != nil && unreachable(err) {
		b.r.failed(b.at)
	}
	return err
}

type errRow struct{ err error }

func (e errRow) Err() error           { return e.err }
func (e errRow) Scan(...any) error    { return e.err }
func (e errRow) ScanStruct(any) error { return e.err }
