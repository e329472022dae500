package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/partnerstream/partnerstream/internal/kafka/embedded"
	"github.com/partnerstream/partnerstream/internal/testenv"
)

// binary is the partnerstream binary built once for these tests: they check the process as
// an operator sees it (exit codes, one-line errors, signals).
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "partnerstream-bin")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "partnerstream")
	spoolDir = filepath.Join(dir, "spool")
	if out, err := exec.Command("go", "build", "-o", binary, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// closedAddr is a loopback address where nothing listens: port 1 (tcpmux) is never served
// here, whereas a port just freed may be taken again by the next listener.
func closedAddr(*testing.T) string { return "127.0.0.1:1" }

// sessionKeys is a valid --session-keys value for the api.
const sessionKeys = "k1:MDEyMzQ1Njc4OTAxMjM0NTY3ODkwMTIzNDU2Nzg5MDE="

// clickIDKeys is a valid --click-id-keys value for the api.
const clickIDKeys = "c1:MDEyMzQ1Njc4OTAxMjM0NTY3ODkwMTIzNDU2Nzg5MDE="

// spoolDir keeps the click spools of the api processes these tests start.
var spoolDir string

func command(env []string, args ...string) *exec.Cmd {
	cmd := exec.Command(binary, args...)
	base := []string{"PARTNERSTREAM_SESSION_KEYS=" + sessionKeys, "PARTNERSTREAM_CLICK_ID_KEYS=" + clickIDKeys, "PARTNERSTREAM_CLICK_SPOOL_DIR=" + filepath.Join(spoolDir, filepath.Base(os.Args[0])+"-"+testenv.Name("s"))}
	if ch := os.Getenv(testenv.EnvClickHouse); ch != "" {
		base = append(base, "PARTNERSTREAM_CLICKHOUSE_ADDR="+ch)
	}
	cmd.Env = append(append(os.Environ(), base...), env...)
	return cmd
}

func TestAComponentRefusesToStartWithAOneLineErrorNamingTheProblem(t *testing.T) {
	pg := testenv.Postgres(t)
	scram, err := embedded.Start(embedded.Options{Users: []embedded.User{{Mechanism: "SCRAM-SHA-512", Name: "ps", Password: "right"}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(scram.Close)
	cases := []struct {
		name string
		args []string
		env  []string
		want string
	}{
		{"api without a Postgres URL", []string{"api"}, nil, "setting --postgres-url (PARTNERSTREAM_POSTGRES_URL): is required"},
		{"api without session keys", []string{"api", "--postgres-url", pg, "--kafka-brokers", closedAddr(t)}, []string{"PARTNERSTREAM_SESSION_KEYS="}, "setting --session-keys (PARTNERSTREAM_SESSION_KEYS): is required"},
		{"api without click-id keys", []string{"api", "--postgres-url", pg, "--kafka-brokers", closedAddr(t)}, []string{"PARTNERSTREAM_CLICK_ID_KEYS="}, "setting --click-id-keys (PARTNERSTREAM_CLICK_ID_KEYS): is required"},
		{"api with a short session key", []string{"api", "--postgres-url", pg, "--kafka-brokers", closedAddr(t), "--session-keys", "k1:c2hvcnQ="}, nil, "setting --session-keys"},
		{"api with a short click-id key", []string{"api", "--postgres-url", pg, "--kafka-brokers", closedAddr(t), "--click-id-keys", "c1:c2hvcnQ="}, nil, "setting --click-id-keys (PARTNERSTREAM_CLICK_ID_KEYS): click-id keys: key \"c1\" has 5 bytes"},
		{"api with a trusted proxy that is not an address range", []string{"api", "--postgres-url", pg, "--kafka-brokers", closedAddr(t), "--trusted-proxies", "10.0.0.0/8,ingress.local"}, nil, "setting --trusted-proxies (PARTNERSTREAM_TRUSTED_PROXIES): trusted proxy \"ingress.local\""},
		{"api with a malformed broker list", []string{"api", "--postgres-url", pg, "--kafka-brokers", "nohost"}, nil, "setting --kafka-brokers"},
		{"api when Postgres is unreachable", []string{"api", "--kafka-brokers", closedAddr(t)}, []string{"PARTNERSTREAM_POSTGRES_URL=postgres://u:secretpw@" + closedAddr(t) + "/db"}, "postgres:"},
		{"api when Kafka is unreachable", []string{"api", "--postgres-url", pg, "--kafka-brokers", closedAddr(t)}, nil, "kafka"},
		{"api with the Kafka password on the command line", []string{"api", "--postgres-url", pg, "--kafka-brokers", closedAddr(t), "--kafka-sasl-password", "secretpw"}, nil, "setting --kafka-sasl-password (PARTNERSTREAM_KAFKA_SASL_PASSWORD): is read from PARTNERSTREAM_KAFKA_SASL_PASSWORD only"},
		{"api with an unreadable Kafka CA", []string{"api", "--postgres-url", pg, "--kafka-brokers", closedAddr(t), "--kafka-tls", "--kafka-tls-ca-file", "/nonexistent/ca.crt"}, nil, "setting --kafka-tls-ca-file (PARTNERSTREAM_KAFKA_TLS_CA_FILE): read the CA bundle"},
		{"api with a wrong Kafka password", []string{"api", "--postgres-url", pg, "--kafka-brokers", scram.Addrs()[0], "--kafka-sasl-mechanism", "SCRAM-SHA-512", "--kafka-sasl-username", "ps"},
			[]string{"PARTNERSTREAM_KAFKA_SASL_PASSWORD=secretpw"}, "SASL Authentication failed"},
		{"ingest when ClickHouse is unreachable", []string{"ingest", "--clickhouse-addr", closedAddr(t), "--kafka-brokers", closedAddr(t)}, nil, "clickhouse"},
		{"migrate with a bad ClickHouse database name", []string{"migrate", "--postgres-url", pg, "--clickhouse-addr", "127.0.0.1:9000", "--clickhouse-database", "drop table"}, nil, "setting --clickhouse-database"},
		{"controller with a missing kubeconfig", []string{"controller", "--kubeconfig", "/nonexistent/kubeconfig"}, nil, "setting --kubeconfig"},
		{"dev with an unknown flag", []string{"dev", "--no-such-flag"}, nil, "unknown flag: --no-such-flag"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cmd := command(append(c.env, "PARTNERSTREAM_METRICS_ADDR="+testenv.FreeAddr(t)), c.args...)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			start := time.Now()
			err := cmd.Run()
			if err == nil {
				t.Fatal("the command started; want a refusal")
			}
			if took := time.Since(start); took > 15*time.Second {
				t.Fatalf("refusing took %s; want a fast failure", took)
			}
			lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
			last := lines[len(lines)-1]
			if !strings.HasPrefix(last, "partnerstream "+c.args[0]+": ") || !strings.Contains(last, c.want) {
				t.Fatalf("last stderr line = %q, want the command and %q", last, c.want)
			}
			if strings.Contains(stderr.String(), "secretpw") {
				t.Fatal("the Postgres password was printed")
			}
		})
	}
}

// startAPI runs `partnerstream api` against real Postgres and the given brokers and waits
// until its ops port answers.
func startAPI(t *testing.T, brokers string) (cmd *exec.Cmd, httpAddr, opsAddr string, stderr *bytes.Buffer) {
	t.Helper()
	httpAddr, opsAddr = testenv.FreeAddr(t), testenv.FreeAddr(t)
	cmd = command([]string{
		"PARTNERSTREAM_POSTGRES_URL=" + testenv.Postgres(t),
		"PARTNERSTREAM_KAFKA_BROKERS=" + brokers,
		"PARTNERSTREAM_KAFKA_REPLICATION_FACTOR=1", // one embedded broker
		"PARTNERSTREAM_HTTP_ADDR=" + httpAddr,
		"PARTNERSTREAM_METRICS_ADDR=" + opsAddr,
		"PARTNERSTREAM_SHUTDOWN_TIMEOUT=10s",
	}, "api")
	stderr = &bytes.Buffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _, _ = cmd.Process.Wait() })
	deadline := time.Now().Add(20 * time.Second)
	for {
		if resp, err := http.Get("http://" + opsAddr + "/healthz"); err == nil {
			resp.Body.Close()
			return cmd, httpAddr, opsAddr, stderr
		}
		if time.Now().After(deadline) {
			t.Fatalf("api did not start:\n%s", stderr)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func readiness(t *testing.T, url string) (int, map[string]string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	var rep struct {
		Checks map[string]string `json:"checks"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&rep)
	return resp.StatusCode, rep.Checks
}

func TestReadinessFlipsWhenADependencyGoesAway(t *testing.T) {
	broker, err := embedded.Start(embedded.Options{Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	_, httpAddr, opsAddr, stderr := startAPI(t, strings.Join(broker.Addrs(), ","))
	for _, url := range []string{"http://" + opsAddr + "/readyz", "http://" + httpAddr + "/readyz"} {
		if code, checks := readiness(t, url); code != http.StatusOK || checks["postgres"] != "ok" || checks["kafka"] != "ok" {
			t.Fatalf("%s = %d %v, want 200 with postgres and kafka ok\n%s", url, code, checks, stderr)
		}
	}
	broker.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, checks := readiness(t, "http://"+opsAddr+"/readyz")
		if code == http.StatusServiceUnavailable && checks["kafka"] != "ok" && checks["postgres"] == "ok" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("readyz = %d %v after the broker stopped; want 503 naming kafka", code, checks)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if code, _ := readiness(t, "http://"+opsAddr+"/healthz"); code != http.StatusOK {
		t.Fatalf("healthz = %d; liveness must not depend on Kafka", code)
	}
}

func TestSIGTERMStopsCleanly(t *testing.T) {
	cmd, httpAddr, _, stderr := startAPI(t, strings.Join(testenv.Kafka(t), ","))
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v\n%s", err, stderr)
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("still running 15s after SIGTERM\n%s", stderr)
	}
	if !strings.Contains(stderr.String(), `"msg":"stopped cleanly"`) {
		t.Fatalf("no clean stop in the log:\n%s", stderr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if _, err := (&net.Dialer{}).DialContext(ctx, "tcp", httpAddr); err == nil {
		t.Fatal("the HTTP port still accepts connections")
	}
	var line map[string]any
	first := strings.SplitN(stderr.String(), "\n", 2)[0]
	if err := json.Unmarshal([]byte(first), &line); err != nil || line["component"] != "api" {
		t.Fatalf("log lines are not JSON with a component: %q", first)
	}
}

func TestVersionAndHelpOfEverySubcommand(t *testing.T) {
	for _, sub := range []string{"api", "ingest", "deliver", "controller", "migrate", "dev", "version"} {
		out, err := command(nil, sub, "--help").CombinedOutput()
		if err != nil || !strings.Contains(string(out), "Usage:") {
			t.Errorf("%s --help: %v\n%s", sub, err, out)
		}
	}
	out, err := command(nil, "version").Output()
	if err != nil || !strings.HasPrefix(string(out), "partnerstream ") {
		t.Fatalf("version: %v %q", err, out)
	}
}

func TestTheREADMESettingsTableIsCurrent(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), settingsTable(newRoot())) {
		t.Fatal("README.md's settings table is stale: run `make docs`")
	}
}
