package chtest

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/partnerstream/partnerstream/internal/testenv"
)

// EnvZooKeeper is the Java class path of ZooKeeper (Debian's zookeeper package), which
// hack/test.sh names; the replicated ClickHouse tests start their own ZooKeeper with it.
const EnvZooKeeper = "PARTNERSTREAM_TEST_ZOOKEEPER_CLASSPATH"

// ClusterName is the remote_servers cluster of Replicas' servers.
const ClusterName = "partnerstream"

// Replicas is a replicated ClickHouse of the test's own: a ZooKeeper and two ClickHouse
// servers on loopback ports, one shard with two replicas (macros shard 01, replicas r0 and
// r1), which the test can kill and start again. Everything stops when the test ends.
type Replicas struct {
	t       testing.TB
	dir     string
	servers []*server
	// ZooKeeperStart and ServersStart are how long ZooKeeper and the servers took to answer.
	ZooKeeperStart, ServersStart time.Duration
}

type server struct {
	addr, config string
	cmd          *exec.Cmd
	exited       chan struct{}
}

// StartReplicas starts ZooKeeper and both servers. Under CI=true a missing ZooKeeper or
// ClickHouse fails the test.
func StartReplicas(t testing.TB) *Replicas {
	t.Helper()
	classpath := testenv.Require(t, EnvZooKeeper)
	if _, err := exec.LookPath("clickhouse-server"); err != nil {
		t.Fatalf("chtest: clickhouse-server: %v", err)
	}
	r := &Replicas{t: t, dir: t.TempDir()}
	zk := testenv.FreeAddr(t)
	start := time.Now()
	r.startZooKeeper(classpath, zk)
	r.ZooKeeperStart = time.Since(start)

	addrs := []string{testenv.FreeAddr(t), testenv.FreeAddr(t)}
	var shard strings.Builder
	for _, a := range addrs {
		host, port, _ := net.SplitHostPort(a)
		fmt.Fprintf(&shard, "<replica><host>%s</host><port>%s</port></replica>", host, port)
	}
	users := filepath.Join(r.dir, "users.xml")
	r.write(users, `<?xml version="1.0"?>
<yandex>
  <profiles><default><allow_experimental_low_cardinality_type>1</allow_experimental_low_cardinality_type><max_memory_usage>2000000000</max_memory_usage></default></profiles>
  <users><default><password></password><networks><ip>127.0.0.1</ip></networks><profile>default</profile><quota>default</quota></default></users>
  <quotas><default></default></quotas>
</yandex>
`)
	zkHost, zkPort, _ := net.SplitHostPort(zk)
	start = time.Now()
	for i, a := range addrs {
		dir := filepath.Join(r.dir, fmt.Sprintf("r%d", i))
		_, port, _ := net.SplitHostPort(a)
		_, interserver, _ := net.SplitHostPort(testenv.FreeAddr(t))
		s := &server{addr: a, config: filepath.Join(dir, "config.xml")}
		r.write(s.config, fmt.Sprintf(`<?xml version="1.0"?>
<yandex>
  <logger><level>warning</level><log>%[1]s/server.log</log><errorlog>%[1]s/error.log</errorlog><size>10M</size><count>1</count></logger>
  <listen_host>127.0.0.1</listen_host>
  <tcp_port>%[2]s</tcp_port>
  <interserver_http_host>127.0.0.1</interserver_http_host>
  <interserver_http_port>%[3]s</interserver_http_port>
  <path>%[1]s/data/</path>
  <tmp_path>%[1]s/tmp/</tmp_path>
  <user_files_path>%[1]s/user_files/</user_files_path>
  <format_schema_path>%[1]s/format_schemas/</format_schema_path>
  <users_config>%[4]s</users_config>
  <default_profile>default</default_profile>
  <default_database>default</default_database>
  <mark_cache_size>268435456</mark_cache_size>
  <timezone>UTC</timezone>
  <!-- a killed server's ZooKeeper session must expire before it can serve again as the same replica: 3 s rather than 30 -->
  <zookeeper><node><host>%[5]s</host><port>%[6]s</port></node><session_timeout_ms>3000</session_timeout_ms></zookeeper>
  <remote_servers><%[7]s><shard><internal_replication>true</internal_replication>%[8]s</shard></%[7]s></remote_servers>
  <macros><shard>01</shard><replica>r%[9]d</replica></macros>
  <distributed_ddl><path>/clickhouse/task_queue/ddl</path></distributed_ddl>
</yandex>
`, dir, port, interserver, users, zkHost, zkPort, ClusterName, shard.String(), i))
		r.servers = append(r.servers, s)
		r.Start(i)
	}
	r.ServersStart = time.Since(start)
	return r
}

// Addrs is the servers' addresses, comma-separated, as --clickhouse-addr takes them.
func (r *Replicas) Addrs() string {
	var a []string
	for _, s := range r.servers {
		a = append(a, s.addr)
	}
	return strings.Join(a, ",")
}

// Addr is server i's address.
func (r *Replicas) Addr(i int) string { return r.servers[i].addr }

// Conn is a connection to server i alone, closed when the test ends.
func (r *Replicas) Conn(i int) driver.Conn {
	r.t.Helper()
	conn, err := clickhouse.Open(&clickhouse.Options{Addr: []string{r.servers[i].addr}, DialTimeout: 5 * time.Second})
	if err != nil {
		r.t.Fatalf("chtest: open replica %d: %v", i, err)
	}
	r.t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// Start starts server i and waits until it answers.
func (r *Replicas) Start(i int) {
	r.t.Helper()
	s := r.servers[i]
	dir := filepath.Dir(s.config)
	for _, d := range []string{"data", "tmp", "user_files", "format_schemas"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			r.t.Fatal(err)
		}
	}
	s.cmd, s.exited = r.spawn(filepath.Join(dir, "stdout.log"), "clickhouse-server", "--config-file="+s.config)
	conn, err := clickhouse.Open(&clickhouse.Options{Addr: []string{s.addr}, DialTimeout: time.Second})
	if err != nil {
		r.t.Fatal(err)
	}
	defer conn.Close()
	r.await(fmt.Sprintf("clickhouse replica %d", i), s.exited, filepath.Join(dir, "error.log"), func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		// Replicated tables need the server's ZooKeeper session, not only the server.
		var nodes uint64
		return conn.QueryRow(ctx, "SELECT count() FROM system.zookeeper WHERE path = '/'").Scan(&nodes) == nil
	})
}

// Kill kills server i (SIGKILL, as a node that dies) and waits until it is gone. (A SIGTERM
// takes 18.16 about ten seconds, waiting for its clients' idle connections.)
func (r *Replicas) Kill(i int) {
	r.t.Helper()
	s := r.servers[i]
	kill(s.cmd, s.exited)
}

func (r *Replicas) startZooKeeper(classpath, addr string) {
	r.t.Helper()
	host, port, _ := net.SplitHostPort(addr)
	dir := filepath.Join(r.dir, "zookeeper")
	cfg := filepath.Join(dir, "zoo.cfg")
	r.write(cfg, fmt.Sprintf("tickTime=500\ninitLimit=10\nsyncLimit=5\ndataDir=%s/data\nclientPort=%s\nclientPortAddress=%s\nadmin.enableServer=false\nforceSync=no\n4lw.commands.whitelist=srvr\n",
		dir, port, host))
	// A small heap and the client JIT: ZooKeeper here holds a few hundred nodes, and starting
	// the JVM is most of its cost.
	_, exited := r.spawn(filepath.Join(dir, "stdout.log"), "java", "-Xms32m", "-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
		"-Dzookeeper.log.dir="+dir, "-cp", classpath, "org.apache.zookeeper.server.quorum.QuorumPeerMain", cfg)
	r.await("zookeeper", exited, filepath.Join(dir, "stdout.log"), func() bool { return serving(addr) })
}

// serving asks ZooKeeper whether it serves requests (its four-letter command srvr): ruok
// answers before it does, and a ClickHouse 18.16 server that finds ZooKeeper not serving
// at its start can crash (its DDL worker).
func serving(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
	if err != nil {
		return false
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("srvr")); err != nil {
		return false
	}
	b, _ := io.ReadAll(c)
	return strings.Contains(string(b), "Mode: standalone")
}

// spawn starts a process, stopped when the test ends; exited closes when it has.
func (r *Replicas) spawn(logFile, name string, args ...string) (*exec.Cmd, chan struct{}) {
	r.t.Helper()
	if err := os.MkdirAll(filepath.Dir(logFile), 0o755); err != nil {
		r.t.Fatal(err)
	}
	out, err := os.Create(logFile)
	if err != nil {
		r.t.Fatal(err)
	}
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		_ = out.Close()
		r.t.Fatalf("chtest: start %s: %v", name, err)
	}
	_ = out.Close()
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	// Their data is the test's temporary directory: nothing to shut down cleanly.
	r.t.Cleanup(func() { kill(cmd, exited) })
	return cmd, exited
}

func kill(cmd *exec.Cmd, exited chan struct{}) {
	select {
	case <-exited:
		return
	default:
	}
	_ = cmd.Process.Kill()
	<-exited
}

// await polls ready for up to a minute, failing the test with the log's tail if the process
// exits or never gets ready.
func (r *Replicas) await(what string, exited <-chan struct{}, logFile string, ready func() bool) {
	r.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !ready() {
		select {
		case <-exited:
			r.t.Fatalf("chtest: %s exited while starting:\n%s", what, tail(logFile))
		default:
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("chtest: %s did not answer within a minute:\n%s", what, tail(logFile))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func tail(file string) string {
	b, _ := os.ReadFile(file)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

func (r *Replicas) write(file, content string) {
	r.t.Helper()
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		r.t.Fatal(err)
	}
	if err := os.WriteFile(file, []byte(content), 0o644); err != nil {
		r.t.Fatal(err)
	}
}
