package chart

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/partnerstream/partnerstream/internal/testenv"
)

// envMetricsDump names a directory where the metrics test also writes each component's
// /metrics as <component>.prom and the PrometheusRule's rules as rules.yaml, for promtool in
// `make lint` (hack/lint.sh).
const envMetricsDump = "PARTNERSTREAM_METRICS_DUMP"

// componentMetrics builds partnerstream, migrates fresh databases, starts api, ingest,
// deliver and controller as processes against the test services (an embedded Kafka broker,
// the envtest API server), waits until each is ready and returns the text of each one's
// /metrics: what Prometheus scrapes from a platform that has just started (the api after
// answering one request).
func componentMetrics(t *testing.T) map[string][]byte {
	t.Helper()
	env.Require(t)
	pg := testenv.Postgres(t)
	chAddr, chDB := testenv.ClickHouse(t)
	// One embedded broker: replication factor 1, not the production default of 3.
	brokers := strings.Join(testenv.Kafka(t), ",")
	kafka := []string{"--kafka-brokers", brokers, "--kafka-replication-factor", "1"}
	namespace := env.Namespace(t)

	dir := t.TempDir()
	bin := filepath.Join(dir, "partnerstream")
	build := exec.Command("go", "build", "-o", bin, "./cmd/partnerstream")
	build.Dir = repoRoot
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	key := make([]byte, 32)
	_, _ = rand.Read(key)

	ch := []string{"--clickhouse-addr", chAddr, "--clickhouse-database", chDB}
	kube := []string{"--kubeconfig", env.Kubeconfig, "--namespace", namespace}
	run(t, bin, append([]string{"migrate", "--postgres-url", pg, "--metrics-addr", testenv.FreeAddr(t)}, ch...)...)
	httpAddr := testenv.FreeAddr(t)
	args := map[string][]string{
		"api": concat(ch, kube, kafka, []string{"--postgres-url", pg, "--http-addr", httpAddr,
			"--session-keys", "k1:" + base64.StdEncoding.EncodeToString(key), "--click-id-keys", "c1:" + base64.StdEncoding.EncodeToString(key),
			"--click-spool-dir", filepath.Join(dir, "spool")}),
		"ingest":     concat(ch, kafka),
		"deliver":    concat(kube, kafka, []string{"--postgres-url", pg}),
		"controller": concat(kube, []string{"--leader-elect=false"}),
	}
	addrs := map[string]string{}
	for _, comp := range components {
		addrs[comp] = testenv.FreeAddr(t)
		start(t, bin, filepath.Join(dir, comp+".log"), append([]string{comp, "--metrics-addr", addrs[comp]}, args[comp]...)...)
	}
	out := map[string][]byte{}
	for _, comp := range components {
		base := "http://" + addrs[comp]
		testenv.Eventually(t, 2*time.Minute, func() (bool, string) {
			code, body := get(base + "/readyz")
			log, _ := os.ReadFile(filepath.Join(dir, comp+".log"))
			return code == http.StatusOK, fmt.Sprintf("%s /readyz = %d %s\n%s", comp, code, body, tail(log, 20))
		})
		if comp == "api" {
			// The HTTP series are by route and status: they exist once the api has answered.
			if code, body := get("http://" + httpAddr + "/healthz"); code != http.StatusOK {
				t.Fatalf("api /healthz = %d %s", code, body)
			}
		}
		code, body := get(base + "/metrics")
		if code != http.StatusOK {
			t.Fatalf("%s /metrics = %d %s", comp, code, body)
		}
		out[comp] = body
	}
	for comp, body := range out {
		dumpMetricsFile(t, comp+".prom", body)
	}
	return out
}

// dumpMetricsFile writes content (bytes as they are, anything else as YAML) to name in the
// directory of envMetricsDump, when it is set.
func dumpMetricsFile(t *testing.T, name string, content any) {
	t.Helper()
	dir := os.Getenv(envMetricsDump)
	if dir == "" {
		return
	}
	b, ok := content.([]byte)
	if !ok {
		var err error
		if b, err = yaml.Marshal(content); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// sampleNames lists the series names of a /metrics text (histograms with their suffixes).
func sampleNames(body []byte) map[string]bool {
	out := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		if i := strings.IndexAny(line, "{ "); i > 0 {
			out[line[:i]] = true
		}
	}
	return out
}

func run(t *testing.T, bin string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput(); err != nil {
		t.Fatalf("partnerstream %s: %v\n%s", args[0], err, out)
	}
}

// start runs a component until the test ends, its output in logPath.
func start(t *testing.T, bin, logPath string, args ...string) {
	t.Helper()
	log, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = log, log
	// The child dies with the test binary even if the test is killed before its cleanup.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", args[0], err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		_ = log.Close()
	})
}

func get(url string) (int, []byte) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, []byte(err.Error())
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, body
}

func tail(b []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(len(lines)-n, 0):], "\n")
}

func concat(parts ...[]string) []string {
	var out []string
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}
