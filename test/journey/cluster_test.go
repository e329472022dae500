//go:build e2e

package journey

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/jackc/pgx/v5"

	"github.com/partnerstream/partnerstream/api/v1alpha1"
	"github.com/partnerstream/partnerstream/internal/testenv"
)

// rateLimitBudget is the per-credential budget the rolling upgrade sets (per minute, the
// chart's default window): the journey before it runs without one, since its traffic
// converts far faster; the checks after it stay well below it.
const rateLimitBudget = 100

// TestCluster is `make e2e`: the platform installed with its chart into a local cluster that
// runs its pods (hack/cluster.sh up made it), with 3 api, 2 ingest and 2 deliver replicas,
// behind a front door (HAProxy, frontdoor_test.go) that every request goes through. Then the
// journey; visitors from their own addresses through X-Forwarded-For; a rolling restart of
// the api; pods force-deleted under traffic; a rolling upgrade under traffic that turns on the
// PROXY protocol and a rate limit; the visitors again through the PROXY protocol; the limits
// across pods; each pod's /metrics; the controller's leader Lease; and an uninstall that
// keeps the CRD and the Webhooks.
func TestCluster(t *testing.T) {
	c := openCluster(t)
	fd := c.startFrontDoor(t)

	began := time.Now()
	c.script(t, append([]string{"install", "--set", "api.rateLimitRequests=0",
		"--set", "api.replicas=3", "--set", "ingest.replicas=2", "--set", "deliver.replicas=2"},
		c.trustedProxyValues(t)...)...)
	t.Logf("helm install --wait and the api through its Service: %s", time.Since(began).Round(time.Second))
	c.allPodsReady(t)
	fd.configure(t, false)

	s := &stack{t: t, baseURL: fd.url, pgURL: c.env["PARTNERSTREAM_POSTGRES_URL"],
		chAddr: c.env["PARTNERSTREAM_CLICKHOUSE_ADDR"], chDB: "partnerstream", inbox: &mailCatcher{url: c.env["PARTNERSTREAM_MAIL_URL"]},
		receiverAddr: net.JoinHostPort(c.nodeIP, "0"), receiverTLS: c.receiverTLS(t), subscribe: c.applyWebhook}
	w := setUp(t, s)
	w.play(t)

	hour := "the visitors' repeats must fall in the hour of their first clicks"
	clearOfTheEdge(t, time.Hour, 4*time.Minute, hour)
	forwarded := c.clicksThroughTheDoor(t, w, fd, 10, "X-Forwarded-For")
	c.restartKeepsUniqueCounts(t, fd, forwarded)

	c.killPodsUnderTraffic(t, w)
	c.upgradeUnderTraffic(t, w, "--set", "api.proxyProtocol=true", "--set", "api.rateLimitRequests="+strconv.Itoa(rateLimitBudget))
	fd.configure(t, true)
	clearOfTheEdge(t, time.Hour, time.Minute, hour)
	c.clicksThroughTheDoor(t, w, fd, 40, "PROXY protocol")
	c.limitsHoldAcrossPods(t, w, fd, rateLimitBudget, 20)

	c.scrapeEveryPod(t)
	c.leaderLease(t)
	c.uninstallKeepsWebhooks(t)
}

// cluster is the local cluster as hack/cluster.sh left it.
type cluster struct {
	root, dir string
	env       map[string]string // .local/cluster/env: the host services' addresses
	nodeIP    string
	ns        string
	kube      client.Client
	webhooks  []types.NamespacedName // the Webhooks this run applied
}

func openCluster(t *testing.T) *cluster {
	t.Helper()
	c := &cluster{root: repoRoot(), ns: "partnerstream", env: map[string]string{}}
	c.dir = filepath.Join(c.root, ".local", "cluster")
	f, err := os.Open(filepath.Join(c.dir, "env"))
	if err != nil {
		t.Fatalf("e2e: no local cluster (run hack/cluster.sh up): %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok {
			c.env[k] = v
		}
	}
	c.nodeIP = c.env["PARTNERSTREAM_NODE_IP"]
	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(c.dir, "kubeconfig"))
	if err != nil {
		t.Fatalf("e2e: kubeconfig: %v", err)
	}
	scheme := newE2EScheme(t)
	if c.kube, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		t.Fatalf("e2e: kubernetes client: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := c.kubectl("get", "pods", "-A", "-o", "wide")
			t.Logf("--- pods:\n%s", out)
			for _, d := range []string{"api", "ingest", "deliver", "controller"} {
				out, _ := c.kubectl("-n", c.ns, "logs", "deploy/partnerstream-"+d, "--tail", "15")
				t.Logf("--- last lines of %s:\n%s", d, out)
			}
		}
	})
	return c
}

func newE2EScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, coordinationv1.AddToScheme, apiextensionsv1.AddToScheme, v1alpha1.AddToScheme} {
		if err := add(s); err != nil {
			t.Fatalf("e2e: scheme: %v", err)
		}
	}
	return s
}

// script runs hack/cluster.sh with the arguments, failing the test on an error.
func (c *cluster) script(t *testing.T, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", append([]string{filepath.Join(c.root, "hack", "cluster.sh")}, args...)...)
	cmd.Dir = c.root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("e2e: hack/cluster.sh %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

func (c *cluster) kubectl(args ...string) (string, error) {
	cmd := exec.Command(filepath.Join(c.root, "bin", "k8s", "kubectl"), append([]string{"--kubeconfig", filepath.Join(c.dir, "kubeconfig")}, args...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (c *cluster) helm(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(c.root, "bin", "helm"), append([]string{"--kubeconfig", filepath.Join(c.dir, "kubeconfig"), "-n", c.ns}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("e2e: helm %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// pods lists the release's pods of a component ("" for all).
func (c *cluster) pods(t *testing.T, component string) []corev1.Pod {
	t.Helper()
	labels := client.MatchingLabels{"app.kubernetes.io/instance": "partnerstream"}
	if component != "" {
		labels["app.kubernetes.io/component"] = component
	}
	var list corev1.PodList
	if err := c.kube.List(context.Background(), &list, client.InNamespace(c.ns), labels); err != nil {
		t.Fatalf("e2e: list pods: %v", err)
	}
	return list.Items
}

// allPodsReady: every pod of the release runs and is Ready, or (the migrate Job) succeeded.
func (c *cluster) allPodsReady(t *testing.T) {
	t.Helper()
	counts := map[string]int{}
	for _, p := range c.pods(t, "") {
		component := p.Labels["app.kubernetes.io/component"]
		if p.Status.Phase == corev1.PodSucceeded {
			counts[component+" (completed)"]++
			continue
		}
		if p.DeletionTimestamp != nil {
			counts[component+" (terminating)"]++ // replaced by the install, on its way out
			continue
		}
		if !podReady(p) {
			t.Fatalf("e2e: pod %s is %s and not Ready", p.Name, p.Status.Phase)
		}
		counts[component]++
	}
	for _, component := range []string{"api", "ingest", "deliver", "controller"} {
		if counts[component] == 0 {
			t.Fatalf("e2e: no Ready pod of %s: %v", component, counts)
		}
	}
	t.Logf("pods Ready: %v", counts)
}

func podReady(p corev1.Pod) bool {
	for _, cond := range p.Status.Conditions {
		if cond.Type == corev1.PodReady {
			return cond.Status == corev1.ConditionTrue && p.DeletionTimestamp == nil
		}
	}
	return false
}

// webhookNamespace is where the release keeps Webhook resources (the components' --namespace).
func (c *cluster) webhookNamespace(t testing.TB) string {
	t.Helper()
	out, err := c.kubectl("-n", c.ns, "get", "deploy/partnerstream-controller", "-o",
		`jsonpath={.spec.template.spec.containers[0].env[?(@.name=="PARTNERSTREAM_NAMESPACE")].value}`)
	if err != nil || strings.TrimSpace(out) == "" {
		t.Fatalf("e2e: the controller's namespace: %v %s", err, out)
	}
	return strings.TrimSpace(out)
}

// applyWebhook subscribes the company with `kubectl apply` of a Webhook resource and reads
// the signing secret from the Secret the controller made for it.
func (c *cluster) applyWebhook(t testing.TB, co *company, url string) (id, secret string) {
	t.Helper()
	ns := c.webhookNamespace(t)
	name := fmt.Sprintf("journey-%s-%d", co.Kind, time.Now().UnixNano()%1e6)
	manifest := fmt.Sprintf(`apiVersion: partnerstream.io/v1alpha1
kind: Webhook
metadata: {name: %s, namespace: %s}
spec:
  companyID: %s
  url: %s
  events: [%s]
  description: journey through the cluster
`, name, ns, co.ID, url, strings.Join(allEvents, ", "))
	cmd := exec.Command(filepath.Join(c.root, "bin", "k8s", "kubectl"), "--kubeconfig", filepath.Join(c.dir, "kubeconfig"), "apply", "-f", "-")
	cmd.Stdin = strings.NewReader(manifest)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("e2e: kubectl apply webhook: %v\n%s", err, out)
	}
	c.webhooks = append(c.webhooks, types.NamespacedName{Namespace: ns, Name: name})
	var wh v1alpha1.Webhook
	testenv.Eventually(t, time.Minute, holds(func() error {
		if err := c.kube.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, &wh); err != nil {
			return err
		}
		if wh.Status.SecretName == "" || wh.ID() == "" {
			return fmt.Errorf("webhook %s has no secret yet: %+v", name, wh.Status)
		}
		return nil
	}))
	var sec corev1.Secret
	if err := c.kube.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: wh.Status.SecretName}, &sec); err != nil {
		t.Fatalf("e2e: signing secret of %s: %v", name, err)
	}
	return wh.ID(), string(sec.Data[v1alpha1.SecretKeyCurrent])
}

// receiverTLS is a certificate for the node's address, signed by the CA the deliver pods
// trust (the chart's egress.caBundle).
func (c *cluster) receiverTLS(t *testing.T) *tls.Config {
	t.Helper()
	caCert, caKey := readPEM(t, filepath.Join(c.dir, "pki", "receiver-ca.crt")), readPEM(t, filepath.Join(c.dir, "pki", "receiver-ca.key"))
	ca, err := x509.ParseCertificate(caCert)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := x509.ParsePKCS8PrivateKey(caKey)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: "journey receiver"},
		IPAddresses: []net.IP{net.ParseIP(c.nodeIP)}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, signer)
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}, MinVersion: tls.VersionTLS12}
}

func readPEM(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("e2e: %v", err)
	}
	block, _ := pem.Decode(b)
	if block == nil {
		t.Fatalf("e2e: no PEM in %s", path)
	}
	return block.Bytes
}

// traffic is clicks from a few visitors and a conversion for every fifth answered click,
// until stopped; it records what was answered.
type traffic struct {
	w      *world
	log    *clickLog
	stopFn context.CancelFunc
	done   sync.WaitGroup

	mu          sync.Mutex
	conversions map[string]string // external id -> conversion id, for every 201/200
	convFailed  int
}

func startTraffic(w *world, prefix string) *traffic {
	ctx, cancel := context.WithCancel(context.Background())
	tr := &traffic{w: w, log: newClickLog(), stopFn: cancel, conversions: map[string]string{}}
	tr.done.Add(2)
	go func() {
		defer tr.done.Done()
		w.drive(ctx, visitors(6), 3, 0, 20*time.Millisecond, tr.log)
	}()
	go func() {
		defer tr.done.Done()
		for n := 0; ctx.Err() == nil; n += 5 {
			id, ok := tr.log.nth(n)
			if !ok {
				time.Sleep(50 * time.Millisecond)
				n -= 5
				continue
			}
			tr.convert(ctx, id, fmt.Sprintf("%s-%d", prefix, n))
		}
	}()
	return tr
}

// convert registers one conversion, retrying while the click is not attributable yet; an
// answer lost with the connection is retried with the same external id (idempotent).
func (tr *traffic) convert(ctx context.Context, clickID, externalID string) {
	for ctx.Err() == nil {
		status, body, err := tr.w.s.try(apiCall{method: "POST", path: "/api/v1/conversions", as: tr.w.adv, auth: "key",
			body: map[string]string{"click_id": clickID, "external_id": externalID, "amount": "10.00", "type": "sale"}})
		if err == nil && (status == http.StatusCreated || status == http.StatusOK) {
			var cv conversion
			if jsonUnmarshal(body, &cv) == nil {
				tr.mu.Lock()
				tr.conversions[externalID] = cv.ID
				tr.mu.Unlock()
			}
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	tr.mu.Lock()
	tr.convFailed++
	tr.mu.Unlock()
}

func (tr *traffic) stop() {
	tr.stopFn()
	tr.done.Wait()
}

// checkNothingLost: every answered click is stored once, every answered conversion is in
// Postgres, and every event reached its receivers.
func (tr *traffic) checkNothingLost(t *testing.T, what string) {
	t.Helper()
	ids, failed := tr.log.answered()
	if len(ids) == 0 {
		t.Fatalf("e2e: %s: no click was answered", what)
	}
	rows, distinct := tr.w.s.awaitClicksStored(t, ids, 2*time.Minute)
	if distinct != uint64(len(ids)) {
		t.Errorf("e2e: %s: %d answered clicks, %d stored (%d rows)", what, len(ids), distinct, rows)
	}
	tr.mu.Lock()
	convs := len(tr.conversions)
	tr.mu.Unlock()
	stored := tr.w.countConversions(t)
	t.Logf("%s: %d clicks answered (%d not answered), stored %d rows / %d distinct; %d conversions answered, %d in Postgres",
		what, len(ids), failed, rows, distinct, convs, stored)
	tr.mu.Lock()
	for ext, id := range tr.conversions {
		if !tr.w.conversionExists(t, id) {
			t.Errorf("e2e: %s: conversion %s (%s) was answered but is not stored", what, id, ext)
		}
	}
	tr.mu.Unlock()
	d := tr.w.awaitDeliveries(t, 3*time.Minute)
	t.Logf("%s: deliveries: %v", what, d)
	checkDeliveries(t, d)
}

// forceDeleteOne force-deletes a running pod of component. A pod of the rollout before may
// still be listed while it goes away: only running pods not being deleted are chosen, and a
// pod gone between the list and the delete is replaced by another.
func (c *cluster) forceDeleteOne(t *testing.T, component string) {
	t.Helper()
	for attempt := 0; ; attempt++ {
		var name string
		for _, p := range c.pods(t, component) {
			if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
				name = p.Name
				break
			}
		}
		if name == "" {
			t.Fatalf("e2e: no running %s pod to delete", component)
		}
		out, err := c.kubectl("-n", c.ns, "delete", "pod", name, "--grace-period=0", "--force", "--wait=false")
		if err == nil {
			t.Logf("force-deleted %s", name)
			return
		}
		if !strings.Contains(out, "NotFound") || attempt == 4 {
			t.Fatalf("e2e: force-delete %s: %v\n%s", name, err, out)
		}
		time.Sleep(time.Second)
	}
}

// killPodsUnderTraffic force-deletes an api pod and a deliver pod in the middle of traffic.
func (c *cluster) killPodsUnderTraffic(t *testing.T, w *world) {
	t.Helper()
	tr := startTraffic(w, "kill")
	time.Sleep(5 * time.Second)
	for _, component := range []string{"api", "deliver"} {
		c.forceDeleteOne(t, component)
		time.Sleep(3 * time.Second)
	}
	time.Sleep(15 * time.Second)
	tr.stop()
	tr.checkNothingLost(t, "pods force-deleted")
	c.awaitRollout(t)
}

// upgradeUnderTraffic changes a value that every Deployment's pods carry (a rolling restart
// of each), and the values given, while clicks flow: the api keeps answering.
func (c *cluster) upgradeUnderTraffic(t *testing.T, w *world, values ...string) {
	t.Helper()
	tr := startTraffic(w, "upgrade")
	time.Sleep(3 * time.Second)
	began := time.Now()
	c.helm(t, append([]string{"upgrade", "partnerstream", filepath.Join(c.root, "charts", "partnerstream"), "--reuse-values",
		"--set", "logLevel=debug", "--wait", "--timeout", "5m"}, values...)...)
	t.Logf("helm upgrade (rolling restart of every Deployment): %s", time.Since(began).Round(time.Second))
	time.Sleep(3 * time.Second)
	tr.stop()
	_, failed := tr.log.answered()
	if failed > 0 {
		t.Errorf("e2e: %d clicks were not answered during the rolling upgrade", failed)
	}
	for _, p := range c.pods(t, "") {
		// A replaced pod may still be on its way out (its preStop sleep): only the ones that stay.
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil && !strings.Contains(podEnv(p, "PARTNERSTREAM_LOG_LEVEL"), "debug") {
			t.Errorf("e2e: pod %s still runs the old configuration", p.Name)
		}
	}
	tr.checkNothingLost(t, "rolling upgrade")
}

func podEnv(p corev1.Pod, name string) string {
	for _, ctr := range p.Spec.Containers {
		for _, e := range ctr.Env {
			if e.Name == name {
				return e.Value
			}
		}
	}
	return ""
}

// awaitRollout waits until every Deployment has its replicas Ready again.
func (c *cluster) awaitRollout(t *testing.T) {
	t.Helper()
	for _, d := range []string{"api", "ingest", "deliver", "controller"} {
		if out, err := c.kubectl("-n", c.ns, "rollout", "status", "deploy/partnerstream-"+d, "--timeout", "3m"); err != nil {
			t.Fatalf("e2e: rollout of %s: %v\n%s", d, err, out)
		}
	}
}

// scrapeEveryPod reads /metrics from each component's pod, on the pod's own address.
func (c *cluster) scrapeEveryPod(t *testing.T) {
	t.Helper()
	want := map[string]string{
		"api":        "partnerstream_outbox_backlog",
		"ingest":     "partnerstream_ingest_",
		"deliver":    "partnerstream_deliver",
		"controller": "controller_runtime_reconcile_total",
	}
	for component, metric := range want {
		for _, p := range c.pods(t, component) {
			if p.Status.PodIP == "" || !podReady(p) {
				continue
			}
			resp, err := http.Get("http://" + net.JoinHostPort(p.Status.PodIP, "9090") + "/metrics")
			if err != nil {
				t.Fatalf("e2e: scrape %s: %v", p.Name, err)
			}
			var b strings.Builder
			_, _ = bufio.NewReader(resp.Body).WriteTo(&b)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || !strings.Contains(b.String(), "partnerstream_build_info") || !strings.Contains(b.String(), metric) {
				t.Errorf("e2e: /metrics of %s (%s): status %d, no partnerstream_build_info or %s", p.Name, component, resp.StatusCode, metric)
			}
		}
	}
}

// leaderLease: the controller holds its leader-election Lease.
func (c *cluster) leaderLease(t *testing.T) {
	t.Helper()
	var lease coordinationv1.Lease
	testenv.Eventually(t, time.Minute, holds(func() error {
		if err := c.kube.Get(context.Background(), types.NamespacedName{Namespace: c.webhookNamespace(t), Name: "partnerstream-controller"}, &lease); err != nil {
			if err2 := c.kube.Get(context.Background(), types.NamespacedName{Namespace: c.ns, Name: "partnerstream-controller"}, &lease); err2 != nil {
				return fmt.Errorf("%v; %v", err, err2)
			}
		}
		holder := ""
		if lease.Spec.HolderIdentity != nil {
			holder = *lease.Spec.HolderIdentity
		}
		for _, p := range c.pods(t, "controller") {
			if strings.HasPrefix(holder, p.Name) && podReady(p) {
				return nil
			}
		}
		return fmt.Errorf("lease held by %q, not by a Ready controller pod", holder)
	}))
	t.Logf("leader Lease %s/%s held by %s", lease.Namespace, lease.Name, *lease.Spec.HolderIdentity)
}

// uninstallKeepsWebhooks: `helm uninstall` removes the release but keeps the CRD and the
// Webhook resources (helm.sh/resource-policy: keep).
func (c *cluster) uninstallKeepsWebhooks(t *testing.T) {
	t.Helper()
	c.helm(t, "uninstall", "partnerstream", "--wait", "--timeout", "3m")
	var crd apiextensionsv1.CustomResourceDefinition
	if err := c.kube.Get(context.Background(), types.NamespacedName{Name: "webhooks.partnerstream.io"}, &crd); err != nil {
		t.Fatalf("e2e: the CRD is gone after helm uninstall: %v", err)
	}
	for _, name := range c.webhooks {
		var wh v1alpha1.Webhook
		if err := c.kube.Get(context.Background(), name, &wh); err != nil {
			t.Fatalf("e2e: Webhook %s after helm uninstall: %v", name, err)
		}
	}
	testenv.Eventually(t, 2*time.Minute, holds(func() error {
		if n := len(c.pods(t, "")); n > 0 {
			return fmt.Errorf("%d pods of the release remain", n)
		}
		return nil
	}))
	t.Logf("uninstalled: the CRD and the %d Webhooks stay", len(c.webhooks))
}

func (w *world) countConversions(t *testing.T) int {
	t.Helper()
	var n int
	w.queryRow(t, `SELECT count(*) FROM conversions`, nil, &n)
	return n
}

func (w *world) conversionExists(t *testing.T, id string) bool {
	t.Helper()
	var n int
	w.queryRow(t, `SELECT count(*) FROM conversions WHERE id = $1`, []any{id}, &n)
	return n == 1
}

func (w *world) queryRow(t *testing.T, sql string, args []any, dest ...any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, w.s.pgURL)
	if err != nil {
		t.Fatalf("e2e: postgres: %v", err)
	}
	defer conn.Close(ctx)
	if err := conn.QueryRow(ctx, sql, args...).Scan(dest...); err != nil {
		t.Fatalf("e2e: %s: %v", sql, err)
	}
}

// holds adapts a check that returns why it does not hold yet to testenv.Eventually.
func holds(check func() error) func() (bool, string) {
	return func() (bool, string) {
		if err := check(); err != nil {
			return false, err.Error()
		}
		return true, ""
	}
}

// mailCatcher reads the sign-in codes where a person trying the local cluster reads them: the
// mail catcher hack/cluster.sh runs (MailDev), through the API behind its web page.
type mailCatcher struct {
	url   string
	taken map[string]bool // ids of the messages Wait returned
}

// Wait returns the oldest message to recipient to (case-insensitive) not returned before.
func (m *mailCatcher) Wait(t testing.TB, to string, timeout time.Duration) testenv.Message {
	t.Helper()
	if m.taken == nil {
		m.taken = map[string]bool{}
	}
	deadline := time.Now().Add(timeout)
	for {
		var mails []struct {
			ID       string `json:"id"`
			Subject  string `json:"subject"`
			Text     string `json:"text"`
			Envelope struct {
				To []struct {
					Address string `json:"address"`
				} `json:"to"`
			} `json:"envelope"`
		}
		resp, err := apiClient.Get(m.url + "/api/email")
		if err == nil {
			err = json.NewDecoder(resp.Body).Decode(&mails)
			resp.Body.Close()
		}
		for _, e := range mails {
			for _, rcpt := range e.Envelope.To {
				if strings.EqualFold(rcpt.Address, to) && !m.taken[e.ID] {
					m.taken[e.ID] = true
					return testenv.Message{To: []string{rcpt.Address}, Subject: e.Subject, Text: e.Text}
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("e2e: no e-mail to %s in the mail catcher %s after %s (last error: %v)", to, m.url, timeout, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}
