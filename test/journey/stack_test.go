package journey

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/base64"
	"net"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/partnerstream/partnerstream/internal/testenv"
)

// stack is one platform: its own Postgres and ClickHouse databases (reached through proxies
// the fault runs can cut), its own broker process and namespace, and the four components.
type stack struct {
	t   testing.TB
	dir string
	bin string

	pgURL   string // direct, for the test's own checks
	chAddr  string // direct
	chDB    string
	pgProxy *proxy
	chProxy *proxy
	inbox   mailbox

	kafkaAddr                                string
	clickIDKeys                              string // the api's --click-id-keys
	baseURL                                  string
	namespace                                string
	broker, api, ingest, deliver, controller *process
	metrics                                  map[string]string // component -> metrics address

	// receiverAddr and receiverTLS place the test's webhook and postback receivers (default
	// a loopback port over plain http); subscribe, when set, replaces the API's POST
	// /api/webhooks (a cluster applies Webhook resources with kubectl).
	receiverAddr string
	receiverTLS  *tls.Config
	subscribe    func(t testing.TB, c *company, url string) (id, secret string)
}

// mailbox is where the platform's e-mails arrive: the test's SMTP listener, or, on the local
// cluster, its mail catcher.
type mailbox interface {
	Wait(t testing.TB, to string, timeout time.Duration) testenv.Message
}

// components are the platform's processes in the order they are reported.
func (s *stack) components() []*process {
	return []*process{s.api, s.ingest, s.deliver, s.controller}
}

// readyTimeout bounds a component's start; the machine is shared, so it is generous.
const readyTimeout = 90 * time.Second

// stackArgs are command-line arguments a test adds to one component (newStack's options).
type stackArgs struct {
	component string
	args      []string
}

// withArgs adds args to the component's command line.
func withArgs(component string, args ...string) stackArgs { return stackArgs{component, args} }

func newStack(t testing.TB, extra ...stackArgs) *stack {
	t.Helper()
	bin := filepath.Join(binaries(t), "partnerstream")
	k := kubernetes(t)
	pgURL := testenv.Postgres(t)
	chAddr, chDB := testenv.ClickHouse(t)
	smtpAddr, inbox := testenv.SMTP(t)
	s := &stack{t: t, dir: logDir(t), bin: bin, pgURL: pgURL, chAddr: chAddr, chDB: chDB, inbox: inbox,
		namespace: k.namespace(t), metrics: map[string]string{}}
	s.pgProxy = newProxy(t, hostPort(t, pgURL))
	s.chProxy = newProxy(t, chAddr)
	proxiedPG := strings.Replace(pgURL, hostPort(t, pgURL), s.pgProxy.addr(), 1)

	// The broker keeps its port and data across restarts.
	s.kafkaAddr = testenv.FreeAddr(t)
	s.broker = &process{t: t, name: "kafka", bin: filepath.Join(binaries(t), "kafka"),
		args:    []string{"--addr", s.kafkaAddr, "--data-dir", filepath.Join(t.TempDir(), "kafka")},
		logPath: filepath.Join(s.dir, "kafka.log"), ready: tcpReady(s.kafkaAddr)}
	s.broker.start()
	t.Cleanup(s.broker.kill)
	s.broker.waitReady(readyTimeout)

	s.migrate(proxiedPG)

	httpAddr := testenv.FreeAddr(t)
	s.baseURL = "http://" + httpAddr
	_, smtpPort, _ := net.SplitHostPort(smtpAddr)
	common := func(name string) []string {
		s.metrics[name] = testenv.FreeAddr(t)
		return []string{"--metrics-addr", s.metrics[name], "--log-level", "info", "--shutdown-timeout", "10s"}
	}
	// One embedded broker: replication factor 1, not the production default of 3.
	kafka := []string{"--kafka-brokers", s.kafkaAddr, "--kafka-partitions", "3", "--kafka-replication-factor", "1"}
	ch := []string{"--clickhouse-addr", s.chProxy.addr(), "--clickhouse-database", chDB}
	s.clickIDKeys = "c1:" + randomKey(t)
	pg := []string{"--postgres-url", proxiedPG}
	kubeFlags := []string{"--kubeconfig", k.kubeconfig, "--namespace", s.namespace}

	api := concat(common("api"), pg, ch, kafka, kubeFlags, []string{
		"--http-addr", httpAddr, "--base-url", s.baseURL,
		"--click-spool-dir", filepath.Join(t.TempDir(), "spool"),
		"--session-keys", "k1:" + randomKey(t),
		"--click-id-keys", s.clickIDKeys,
		"--smtp-host", "127.0.0.1", "--smtp-port", smtpPort, "--smtp-tls", "none",
		// The load of the fault runs and the soak comes from one credential.
		"--rate-limit-requests", "0",
		"--webhook-secret-wait", "60s",
	})
	ingest := concat(common("ingest"), ch, kafka, []string{"--ingest-batch-interval", "200ms"})
	deliver := concat(common("deliver"), pg, kafka, kubeFlags)
	// The receivers listen on loopback, which the SSRF guard refuses unless allow-listed.
	deliver = append(deliver, "--egress-allow-cidrs", "127.0.0.0/8")
	controller := concat(common("controller"), kubeFlags, []string{"--leader-elect=false"})

	mk := func(name string, args []string) *process {
		for _, e := range extra {
			if e.component == name {
				args = append(args, e.args...)
			}
		}
		p := &process{t: t, name: name, bin: bin, args: append([]string{name}, args...),
			logPath: filepath.Join(s.dir, name+".log"), ready: httpReady("http://" + s.metrics[name] + "/readyz")}
		t.Cleanup(p.stop)
		return p
	}
	s.controller = mk("controller", controller)
	s.api = mk("api", api)
	s.ingest = mk("ingest", ingest)
	s.deliver = mk("deliver", deliver)
	for _, p := range s.components() {
		p.start()
	}
	for _, p := range s.components() {
		p.waitReady(readyTimeout)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, p := range append(s.components(), s.broker) {
				t.Logf("--- last lines of %s (%s):\n%s", p.name, p.logPath, p.tail(15))
			}
		}
	})
	return s
}

// migrate runs `partnerstream migrate`, as the Helm hook does before the components start.
func (s *stack) migrate(pgURL string) {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, s.bin, "migrate", "--postgres-url", pgURL, "--clickhouse-addr", s.chProxy.addr(),
		"--clickhouse-database", s.chDB, "--metrics-addr", testenv.FreeAddr(s.t))
	if out, err := cmd.CombinedOutput(); err != nil {
		s.t.Fatalf("journey: partnerstream migrate: %v\n%s", err, out)
	}
}

func concat(parts ...[]string) []string {
	var out []string
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func hostPort(t testing.TB, rawURL string) string {
	t.Helper()
	m := regexp.MustCompile(`@([^/?]+)`).FindStringSubmatch(rawURL)
	if m == nil {
		t.Fatalf("journey: no host:port in %s", rawURL)
	}
	return m[1]
}

func randomKey(t testing.TB) string {
	t.Helper()
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(b)
}
