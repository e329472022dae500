package ingest

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/partnerstream/partnerstream/internal/kafka"
	"github.com/partnerstream/partnerstream/internal/stats"
	"github.com/partnerstream/partnerstream/internal/store/chstore"
	"github.com/partnerstream/partnerstream/internal/testenv"
	"github.com/partnerstream/partnerstream/internal/testenv/chtest"
)

// A replicated ClickHouse (docs/stats.md, "A replicated ClickHouse"): two replicas of one
// shard and a ZooKeeper, the schema migrated ON CLUSTER, ingest writing through one replica
// at a time. The figures of every company and grouping equal the reference computed from the
// source events on both replicas: while the replica ingest wrote through is stopped (ingest
// moves to the other, the stats read from it), once it is back and has caught up, when an
// ingester takes the partitions over through a replica that lags (it waits for it rather than
// count twice), and after the retention job dropped the raw months through the cluster.
func TestAReplicatedClickHouseKeepsFiguresExactThroughAStoppedReplica(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t0 := time.Now()
	rep := chtest.StartReplicas(t)
	t.Logf("ZooKeeper answered %s after its start, the two ClickHouse servers %s after theirs", rep.ZooKeeperStart, rep.ServersStart)
	db := testenv.Name("pst")
	open := func(addrs string) driver.Conn {
		t.Helper()
		conn, err := chstore.Open(ctx, chstore.Config{Addr: addrs, Database: db, Cluster: chtest.ClusterName})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = conn.Close() })
		return conn
	}
	conn := open(rep.Addrs()) // replica 0 first
	start := time.Now()
	for range 2 { // the second run finds every version recorded, on either replica
		if err := chstore.Migrate(ctx, conn, db, nil); err != nil {
			t.Fatalf("migrate on the cluster: %v", err)
		}
	}
	t.Logf("migrated ON CLUSTER in %s", time.Since(start))
	ready := time.Now()
	replica := []driver.Conn{rep.Conn(0), rep.Conn(1)}
	versions := []uint64{assertReplicatedSchema(t, replica[0], db, 0), assertReplicatedSchema(t, replica[1], db, 1)}
	if versions[0] != versions[1] || versions[0] < 10 {
		t.Errorf("the replicas read %d and %d applied migrations, want the same, every one", versions[0], versions[1])
	}

	cfg := kafka.Config{Brokers: testenv.Kafka(t), Partitions: 6, ReplicationFactor: 1, Retention: time.Hour, ClientID: "ingest-replicated-test"}
	if err := kafka.EnsureTopics(ctx, cfg, kafka.TopicClicks, kafka.TopicEvents); err != nil {
		t.Fatal(err)
	}
	e := &env{kafka: cfg, db: db, conn: conn}
	ingest := func(conn driver.Conn) (stop func()) {
		return testenv.Run(t, (&env{kafka: cfg, db: db, conn: conn}).service(t, Options{BatchSize: 500, BatchInterval: 50 * time.Millisecond}))
	}
	// The datasets' click ids are plain (not signed), so a conversion takes its click's link
	// and sub1 only if the click is stored before it: clicks go first.
	produce := func(ds ...dataset) {
		for _, d := range ds {
			e.produce(t, kafka.TopicClicks, d.clickMessages())
		}
		e.waitCaughtUp(t, DefaultGroupPrefix+"-clicks", kafka.TopicClicks, 2*time.Minute)
		for _, d := range ds {
			e.produce(t, kafka.TopicEvents, d.eventMessages())
		}
	}
	caughtUp := func() {
		e.waitCaughtUp(t, DefaultGroupPrefix+"-clicks", kafka.TopicClicks, 2*time.Minute)
		e.waitCaughtUp(t, DefaultGroupPrefix+"-events", kafka.TopicEvents, 2*time.Minute)
	}
	d1, d2, d3 := newDataset(31, 1000), newDataset(32, 1000), newDataset(33, 1000)

	// Both replicas up.
	stop := ingest(conn)
	produce(d1)
	caughtUp()
	for i := range replica {
		waitExact(t, replica[i], db, d1, i)
	}

	// The replica ingest writes through dies (replica 1 has fetched everything, checked
	// above): ingest moves to the other, and the stats read through the cluster's connection
	// answer from it. Everything of d1 comes again.
	rep.Kill(0)
	start = time.Now()
	produce(d1, d2)
	caughtUp()
	t.Logf("with replica 0 stopped, ingest stored a second dataset and a replay of the first in %s", time.Since(start))
	assertExact(t, replica[1], db, union(d1, d2), "replica 1 while replica 0 is stopped")
	assertExact(t, conn, db, union(d1, d2), "the cluster's connection while replica 0 is stopped")

	// It comes back and catches up.
	start = time.Now()
	rep.Start(0)
	waitExact(t, replica[0], db, union(d1, d2), 0)
	t.Logf("replica 0 restarted and caught up in %s", time.Since(start))
	stop()

	// An ingester through replica 1 stores d3 while replica 0 fetches nothing; then one that
	// reads replica 0 takes the partitions over and gets d3 and d2 again. It must wait for
	// replica 0 to catch up: planning against it now would store d3 a second time.
	// The second ingester's connection has served replica 0 before, so only the catch-up
	// of a new generation stands between it and a replica that lags.
	toReplica0 := open(rep.Addr(0))
	if err := chstore.CatchUp(ctx, toReplica0); err != nil {
		t.Fatal(err)
	}
	setFetches(t, replica[0], db, "STOP")
	stop = ingest(open(rep.Addr(1)))
	produce(d3)
	caughtUp()
	stop()
	stop = ingest(toReplica0)
	for _, d := range []dataset{d3, d2} { // replays only: nothing waits for the ingester
		e.produce(t, kafka.TopicClicks, d.clickMessages())
		e.produce(t, kafka.TopicEvents, d.eventMessages())
	}
	time.Sleep(2 * time.Second)
	assertExact(t, replica[1], db, union(d1, d2, d3), "replica 1 while an ingester waits for replica 0")
	if figuresDiff(t, replica[0], db, union(d1, d2, d3), checked...) == "" {
		t.Fatal("replica 0 holds d3 although it fetched nothing: the test proves nothing")
	}
	setFetches(t, replica[0], db, "START")
	caughtUp()
	stop()
	for i := range replica {
		waitExact(t, replica[i], db, union(d1, d2, d3), i)
	}

	// Retention drops the raw months through the cluster: both replicas lose them, and the
	// figures, read from the rollups, stay.
	w := NewWriter(conn, db)
	w.now = func() time.Time { return firstDay.AddDate(1, 2, 0) } // 13 months kept: November 2026 goes
	if err := (retention{w: w, months: 13, log: slog.New(slog.DiscardHandler)}).drop(ctx); err != nil {
		t.Fatalf("retention on the cluster: %v", err)
	}
	for i, c := range replica {
		testenv.Eventually(t, 30*time.Second, func() (bool, string) {
			var n uint64
			if err := c.QueryRow(ctx, "SELECT (SELECT count() FROM "+db+".clicks) + (SELECT count() FROM "+db+".click_index) + (SELECT count() FROM "+
				db+".conversion_changes)").Scan(&n); err != nil {
				return false, err.Error()
			}
			return n == 0, fmt.Sprintf("replica %d still holds %d raw rows of a dropped month", i, n)
		})
		assertExact(t, c, db, union(d1, d2, d3), "after retention", ingestGroupings...)
	}
	t.Logf("ZooKeeper, the servers and the migrations took %s, the rest of the test %s", ready.Sub(t0), time.Since(ready))
}

// assertReplicatedSchema checks that every table of the schema has a replicated engine on the
// replica, and returns how many migrations it reads as applied.
func assertReplicatedSchema(t *testing.T, c driver.Conn, db string, i int) uint64 {
	t.Helper()
	ctx := context.Background()
	rows, err := c.Query(ctx, "SELECT name, engine FROM system.tables WHERE database = ? AND engine NOT LIKE '%View'", db)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	tables := 0
	for rows.Next() {
		var name, engine string
		if err := rows.Scan(&name, &engine); err != nil {
			t.Fatal(err)
		}
		tables++
		if !strings.HasPrefix(engine, "Replicated") {
			t.Errorf("replica %d: table %s has engine %s, want a replicated one", i, name, engine)
		}
	}
	if tables < 13 {
		t.Errorf("replica %d holds %d tables, want every table of the migrations and schema_migrations", i, tables)
	}
	if err := c.Exec(ctx, "SYSTEM SYNC REPLICA "+db+".schema_migrations"); err != nil {
		t.Fatal(err)
	}
	var versions uint64
	if err := c.QueryRow(ctx, "SELECT count() FROM "+db+".schema_migrations FINAL").Scan(&versions); err != nil {
		t.Fatal(err)
	}
	return versions
}

func setFetches(t *testing.T, c driver.Conn, db, verb string) {
	t.Helper()
	tables, err := scanStringsQuery(c, "SELECT table FROM system.replicas WHERE database = '"+db+"'")
	if err != nil {
		t.Fatal(err)
	}
	for _, table := range tables {
		if err := c.Exec(context.Background(), "SYSTEM "+verb+" FETCHES "+db+"."+table); err != nil {
			t.Fatal(err)
		}
	}
}

func scanStringsQuery(c driver.Conn, query string) ([]string, error) {
	rows, err := c.Query(context.Background(), query)
	if err != nil {
		return nil, err
	}
	return scanStrings(rows)
}

func union(ds ...dataset) dataset {
	var u dataset
	for _, d := range ds {
		u.clicks = append(u.clicks, d.clicks...)
		u.events = append(u.events, d.events...)
	}
	return u
}

// checked are the groupings the steps compare: by day (clicks and conversions by status), by
// link and by sub1 (each conversion under its click's). The last step compares every one.
var checked = []stats.GroupBy{stats.Day, stats.Link, stats.Sub1}

func assertExact(t *testing.T, c driver.Conn, db string, d dataset, where string, groupings ...stats.GroupBy) {
	t.Helper()
	if len(groupings) == 0 {
		groupings = checked
	}
	if diffs := figuresDiff(t, c, db, d, groupings...); diffs != "" {
		t.Fatalf("%s: the figures differ from the reference:\n%s", where, diffs)
	}
}

// waitExact waits until replica i's figures equal the reference (it may be catching up).
func waitExact(t *testing.T, c driver.Conn, db string, d dataset, i int) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		diffs := figuresDiff(t, c, db, d, checked...)
		if diffs == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("replica %d: the figures differ from the reference after a minute:\n%s", i, diffs)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
