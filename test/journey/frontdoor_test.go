//go:build e2e

package journey

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The front door: HAProxy, from Debian's packages (hack/deps.sh), in front of the api Service
// as a load balancer or an Ingress is in production, adding X-Forwarded-For, or in the
// second mode a PROXY protocol v2 header. The api trusts it (api.trustedProxies) as the pods
// see it: the host's connections reach a pod from the bridge's address (kube-proxy
// masquerades what goes through the Service). E2E_TRUSTED_PROXIES=off installs the chart
// without that setting, and the run must then fail on the visitors' addresses.
//
// Besides the Service, the proxy has one backend per api pod, picked by the request header
// podHeader: a visitor's repeat is sent to another pod than its first click, so "a repeat is a
// duplicate whichever pod answers it" does not depend on how the Service happened to spread.

const (
	podHeader  = "X-E2E-Pod"
	apiPodPort = "8080" // the chart's api.port
)

// pending names the assertions that wait for work not yet merged (E2E_PENDING=unique,limits
// skips them while developing): unique clicks exact across replicas, and limits that hold
// across replicas. A full run leaves it empty.
func pending(what string) bool {
	return slices.Contains(strings.Split(os.Getenv("E2E_PENDING"), ","), what)
}

// trustedProxyValues are the helm arguments that make the api trust the front door.
func (c *cluster) trustedProxyValues(t *testing.T) []string {
	if os.Getenv("E2E_TRUSTED_PROXIES") == "off" {
		t.Log("E2E_TRUSTED_PROXIES=off: the api trusts no proxy; the visitors' addresses must come out wrong")
		return nil
	}
	return []string{"--set", "api.trustedProxies={" + c.env["PARTNERSTREAM_POD_GATEWAY"] + "}"}
}

type frontDoor struct {
	c             *cluster
	dir, url      string
	port          int
	cmd           *exec.Cmd
	generation    int
	proxyProtocol bool
	pods          []string // the api pods' addresses, backends pod0, pod1, ...
}

// startFrontDoor runs HAProxy in master-worker mode (a reload is SIGUSR2) on a free loopback
// port, in front of the api Service's node port.
func (c *cluster) startFrontDoor(t *testing.T) *frontDoor {
	t.Helper()
	bin, err := exec.LookPath("haproxy")
	if err != nil {
		t.Fatalf("e2e: haproxy is not installed (hack/deps.sh installs it): %v", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	fd := &frontDoor{c: c, dir: t.TempDir(), port: port, url: "http://127.0.0.1:" + strconv.Itoa(port)}
	fd.write(t)
	logf, err := os.Create(filepath.Join(fd.dir, "haproxy.log"))
	if err != nil {
		t.Fatal(err)
	}
	fd.cmd = exec.Command(bin, "-W", "-db", "-f", filepath.Join(fd.dir, "haproxy.cfg"))
	fd.cmd.Stdout, fd.cmd.Stderr = logf, logf
	if err := fd.cmd.Start(); err != nil {
		t.Fatalf("e2e: start haproxy: %v", err)
	}
	t.Cleanup(func() {
		_ = fd.cmd.Process.Signal(syscall.SIGTERM)
		_ = fd.cmd.Wait()
		logf.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			t.Logf("--- haproxy:\n%s", b)
		}
	})
	fd.await(t)
	return fd
}

// configure points the per-pod backends at the api pods that are Ready now and chooses the
// mode (X-Forwarded-For, or a PROXY protocol v2 header), then reloads the proxy.
func (fd *frontDoor) configure(t *testing.T, proxyProtocol bool) {
	t.Helper()
	fd.proxyProtocol = proxyProtocol
	fd.pods = nil
	for _, p := range fd.c.pods(t, "api") {
		if podReady(p) && p.Status.PodIP != "" {
			fd.pods = append(fd.pods, p.Status.PodIP)
		}
	}
	slices.Sort(fd.pods)
	if len(fd.pods) < 2 {
		t.Fatalf("e2e: %d Ready api pods behind the front door, want at least 2", len(fd.pods))
	}
	fd.write(t)
	if err := fd.cmd.Process.Signal(syscall.SIGUSR2); err != nil {
		t.Fatalf("e2e: reload haproxy: %v", err)
	}
	fd.await(t)
	// Kept-alive connections would still reach the old worker.
	apiClient.CloseIdleConnections()
	mode := "X-Forwarded-For"
	if proxyProtocol {
		mode = "PROXY protocol v2"
	}
	t.Logf("front door %s: %s, api pods %v", fd.url, mode, fd.pods)
}

func (fd *frontDoor) write(t *testing.T) {
	t.Helper()
	fd.generation++
	send, forward := "", "    option forwardfor\n"
	if fd.proxyProtocol {
		send, forward = " send-proxy-v2", ""
	}
	var b strings.Builder
	// http-server-close: a new connection to the api for every request, so that the
	// Service spreads them over the pods as an ingress controller does.
	fmt.Fprintf(&b, `global
    maxconn 4096
defaults
    mode http
    timeout connect 5s
    timeout client 60s
    timeout server 60s
    retries 3
    option redispatch
    option http-server-close
%sfrontend api
    bind 127.0.0.1:%d
    http-request return status 200 content-type text/plain string "%d" if { path /front-door/generation }
`, forward, fd.port, fd.generation)
	for i := range fd.pods {
		fmt.Fprintf(&b, "    use_backend pod%d if { req.hdr(%s) -m str %d }\n", i, podHeader, i)
	}
	fmt.Fprintf(&b, "    default_backend service\nbackend service\n    server api %s%s\n",
		strings.TrimPrefix(fd.c.env["PARTNERSTREAM_BASE_URL"], "http://"), send)
	for i, ip := range fd.pods {
		fmt.Fprintf(&b, "backend pod%d\n    server api %s%s\n", i, net.JoinHostPort(ip, apiPodPort), send)
	}
	if err := os.WriteFile(filepath.Join(fd.dir, "haproxy.cfg"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// await polls until the proxy answers with the configuration just written.
func (fd *frontDoor) await(t *testing.T) {
	t.Helper()
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	want := strconv.Itoa(fd.generation)
	got := ""
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if resp, err := hc.Get(fd.url + "/front-door/generation"); err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if got = string(b); got == want {
				return
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("e2e: haproxy did not take configuration %s (it answers %q)", want, got)
}

// doorVisitor is a browser at its own loopback address (all of 127.0.0.0/8 is this machine),
// with or without cookies, possibly sending an X-Forwarded-For of its own.
type doorVisitor struct {
	*visitor
	addr   string
	forged string
	clicks []string // answered click ids, in order
}

// oneAgent is every front-door visitor's user agent: visitors without cookies are then told
// apart by their address alone, as the ones behind one proxy were not.
var oneAgent = browserAgent("front door")

func newDoorVisitor(addr string, cookies bool, forged string) *doorVisitor {
	var jar http.CookieJar
	if cookies {
		jar, _ = cookiejar.New(nil)
	}
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(addr)}, Timeout: 10 * time.Second}
	return &doorVisitor{visitor: &visitor{ua: oneAgent, hc: browserClient(jar, &http.Transport{DialContext: d.DialContext})},
		addr: addr, forged: forged}
}

// click opens the link through the front door, answered by api pod number pod.
func (v *doorVisitor) click(t *testing.T, fd *frontDoor, code string, pod int) {
	t.Helper()
	h := http.Header{podHeader: {strconv.Itoa(pod % len(fd.pods))}}
	if v.forged != "" {
		h.Set("X-Forwarded-For", v.forged)
	}
	id, err := v.clickWith(fd.url, code, h)
	if err != nil {
		t.Fatalf("e2e: a click of %s through the front door: %v", v.addr, err)
	}
	v.clicks = append(v.clicks, id)
}

// doorRun is one link clicked by visitors through the front door.
type doorRun struct {
	w        *world
	fd       *frontDoor
	mode     string
	linkID   string
	code     string
	visitors []*doorVisitor
	reader   *company // the advertiser with a key of its own, for the figures
}

// clicksThroughTheDoor: 12 visitors from 127.0.<first>.1, 127.0.<first+1>.2, ... (each in a
// /24 of its own, since ClickHouse keeps addresses truncated to their /24) click a new link, every other one
// with cookies, a third of them once and the rest three times, each click answered by the
// next api pod; every fourth visitor sends an X-Forwarded-For naming another client and the
// trusted proxy, as a forger would. Then it checks what was recorded.
func (c *cluster) clicksThroughTheDoor(t *testing.T, w *world, fd *frontDoor, first int, mode string) *doorRun {
	t.Helper()
	began := time.Now()
	defer func() {
		t.Logf("%s: visitors through the front door checked in %s", mode, time.Since(began).Round(time.Second))
	}()
	r := &doorRun{w: w, fd: fd, mode: mode, reader: w.withNewKey(t, w.adv)}
	r.linkID, r.code = w.newLink(t, "door-"+strings.ReplaceAll(strings.ToLower(mode), " ", "-"))
	for i := range 12 {
		forged := ""
		if i%4 == 1 {
			forged = "198.51.100.7, " + c.env["PARTNERSTREAM_POD_GATEWAY"]
		}
		v := newDoorVisitor(fmt.Sprintf("127.0.%d.%d", first+i, i+1), i%2 == 0, forged)
		clicks := 3
		if i%3 == 0 {
			clicks = 1
		}
		for j := range clicks {
			v.click(t, fd, r.code, i+j)
		}
		r.visitors = append(r.visitors, v)
	}
	r.check(t, 0)
	return r
}

// storedAddr is addr as ClickHouse keeps it by default: its /24 (docs/tracking.md, "Privacy").
func storedAddr(addr string) string {
	return netip.PrefixFrom(netip.MustParseAddr(addr), 24).Masked().Addr().String()
}

// repeat: every visitor clicks once more, answered by another pod than its previous click.
func (r *doorRun) repeat(t *testing.T) {
	t.Helper()
	for i, v := range r.visitors {
		v.click(t, r.fd, r.code, i+len(v.clicks))
	}
	r.check(t, 1)
}

// check asserts, once every answered click is stored: each click carries its visitor's
// address; each visitor's first click is unique and the others duplicates, whichever pod
// answered; and the link's unique clicks are the number of visitors, exactly. repeats is how
// many of each visitor's last clicks came after a rolling restart.
func (r *doorRun) check(t *testing.T, repeats int) {
	t.Helper()
	var ids []string
	for _, v := range r.visitors {
		ids = append(ids, v.clicks...)
	}
	s := r.w.s
	if _, distinct := s.awaitClicksStored(t, ids, 2*time.Minute); distinct != uint64(len(ids)) {
		t.Fatalf("e2e: %s: %d clicks answered, %d stored", r.mode, len(ids), distinct)
	}
	facts := s.clickFacts(t, ids)
	var wrongAddr, wrongDup []string
	for _, v := range r.visitors {
		for j, id := range v.clicks {
			f := facts[id]
			if want := storedAddr(v.addr); f.ip != want {
				wrongAddr = append(wrongAddr, fmt.Sprintf("%s recorded as %s, want %s (X-Forwarded-For sent: %q)", v.addr, f.ip, want, v.forged))
			}
			if f.duplicate != (j > 0) {
				wrongDup = append(wrongDup, fmt.Sprintf("%s's click %d of %d duplicate=%v", v.addr, j+1, len(v.clicks), f.duplicate))
			}
		}
	}
	if len(wrongAddr) > 0 {
		t.Fatalf("e2e: %s: the client address: %d of %d clicks do not carry their visitor's address:\n  %s",
			r.mode, len(wrongAddr), len(ids), strings.Join(wrongAddr, "\n  "))
	}
	t.Logf("%s: %d clicks of %d visitors through the front door, each recorded with its visitor's address (forged X-Forwarded-For ignored)",
		r.mode, len(ids), len(r.visitors))
	if pending("unique") {
		t.Logf("E2E_PENDING=unique: not checking duplicates (%d off) nor the unique count", len(wrongDup))
		return
	}
	if len(wrongDup) > 0 {
		t.Errorf("e2e: %s: a repeat must be a duplicate and a first click unique, whichever api pod answered (restarts: %d):\n  %s",
			r.mode, repeats, strings.Join(wrongDup, "\n  "))
	}
	got := r.w.awaitLinkFigures(t, r.reader, r.linkID, len(ids), len(r.visitors), time.Minute)
	t.Logf("%s: link figures: %d clicks, %d unique (visitors: %d)", r.mode, got.Clicks, got.UniqueClicks, len(r.visitors))
}

type clickFact struct {
	ip        string
	duplicate bool
}

// clickFacts reads each click's recorded address and duplicate flag from ClickHouse.
func (s *stack) clickFacts(t *testing.T, ids []string) map[string]clickFact {
	t.Helper()
	conn := s.clickhouse(t)
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rows, err := conn.Query(ctx, "SELECT click_id, any(ip), max(is_duplicate) FROM "+s.chDB+".clicks WHERE has(?, click_id) GROUP BY click_id", ids)
	if err != nil {
		t.Fatalf("e2e: click facts: %v", err)
	}
	defer rows.Close()
	out := map[string]clickFact{}
	for rows.Next() {
		var id, ip string
		var dup uint8
		if err := rows.Scan(&id, &ip, &dup); err != nil {
			t.Fatalf("e2e: click facts: %v", err)
		}
		out[id] = clickFact{ip: ip, duplicate: dup == 1}
	}
	return out
}

// newLink makes a tracking link of the journey's program for the affiliate.
func (w *world) newLink(t *testing.T, sub1 string) (id, code string) {
	t.Helper()
	var link struct {
		ID   string `json:"id"`
		Code string `json:"code"`
	}
	w.s.call(apiCall{method: "POST", path: "/api/v1/tracking-links", as: w.aff, auth: "key",
		body: map[string]string{"program_id": w.programID, "sub1": sub1}}, &link, http.StatusCreated)
	return link.ID, link.Code
}

// withNewKey is the company with an API key of its own, whose rate-limit budget nothing else
// has spent.
func (w *world) withNewKey(t *testing.T, c *company) *company {
	t.Helper()
	var key struct {
		Key string `json:"key"`
	}
	w.s.call(apiCall{method: "POST", path: "/api/api-keys", as: c, auth: "session", body: map[string]string{"name": "e2e " + time.Now().Format(time.TimeOnly)}},
		&key, http.StatusCreated)
	cp := *c
	cp.APIKey = key.Key
	return &cp
}

// awaitLinkFigures polls the link's statistics, once a second (well within any budget the
// run sets), until they show the clicks and the unique clicks wanted.
func (w *world) awaitLinkFigures(t *testing.T, as *company, linkID string, clicks, unique int, within time.Duration) figures {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		var got figures
		for _, row := range w.statsBy(t, as, "link") {
			if row.LinkID == linkID {
				got = row.figures
			}
		}
		if got.Clicks == clicks && got.UniqueClicks == unique {
			return got
		}
		if time.Now().After(deadline) {
			t.Errorf("e2e: link %s after %v: %d clicks and %d unique, want %d and %d (one per visitor, exactly)",
				linkID, within, got.Clicks, got.UniqueClicks, clicks, unique)
			return got
		}
		time.Sleep(time.Second)
	}
}

// restartKeepsUniqueCounts: `kubectl rollout restart` of the api, then every visitor of the
// run clicks again: each repeat is a duplicate, and the link's unique clicks do not change.
func (c *cluster) restartKeepsUniqueCounts(t *testing.T, fd *frontDoor, r *doorRun) {
	t.Helper()
	began := time.Now()
	if out, err := c.kubectl("-n", c.ns, "rollout", "restart", "deploy/partnerstream-api"); err != nil {
		t.Fatalf("e2e: rollout restart: %v\n%s", err, out)
	}
	if out, err := c.kubectl("-n", c.ns, "rollout", "status", "deploy/partnerstream-api", "--timeout", "3m"); err != nil {
		t.Fatalf("e2e: rollout of the api: %v\n%s", err, out)
	}
	t.Logf("api rolled (kubectl rollout restart): %s", time.Since(began).Round(time.Second))
	fd.configure(t, fd.proxyProtocol)
	r.repeat(t)
	t.Logf("rolling restart and the repeats checked: %s", time.Since(began).Round(time.Second))
}

// clearOfTheEdge waits for the next period of the clock (an hour, a minute) when fewer than
// span are left of this one: what must fall in one period (a visitor's repeats in the hour of
// its first click, a burst in one rate-limit window, aligned on the clock) must not straddle
// two by chance.
func clearOfTheEdge(t *testing.T, period, span time.Duration, why string) {
	t.Helper()
	next := time.Now().Truncate(period).Add(period)
	if left := time.Until(next); left < span {
		t.Logf("waiting %s for the next %s: %s", left.Round(time.Second), period, why)
		time.Sleep(left + 100*time.Millisecond)
	}
}

// limitsHoldAcrossPods: with the per-credential budget set (api.rateLimitRequests per
// api.rateLimitWindow), a burst with a fresh API key spread over every api pod gets the
// budget, not the budget per pod; one address sending wrong keys gets 401 for the
// failed-credential budget (api.failedAuthLimit) and 429 after it, across the pods, while a
// valid key from that address is still served and another address behind the same proxy is
// not slowed.
func (c *cluster) limitsHoldAcrossPods(t *testing.T, w *world, fd *frontDoor, budget, failedBudget int) {
	t.Helper()
	if pending("limits") {
		t.Log("E2E_PENDING=limits: not checking the limits across pods")
		return
	}
	began := time.Now()
	defer func() { t.Logf("limits checked in %s", time.Since(began).Round(time.Second)) }()
	key := w.withNewKey(t, w.adv).APIKey
	burst := func(v *doorVisitor, key string, n int) map[int]int {
		clearOfTheEdge(t, time.Minute, 20*time.Second, "the windows of the limits are minutes of the clock")
		statuses := map[int]int{}
		var mu sync.Mutex
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				status := v.get(t, fd, "/api/v1/postbacks", key, i)
				mu.Lock()
				statuses[status]++
				mu.Unlock()
			}()
			if i%8 == 7 {
				wg.Wait() // a few at a time: the budget, not the machine, must refuse them
			}
		}
		wg.Wait()
		return statuses
	}
	within := func(got, want int) bool { return got*10 >= want*9 && got*10 <= want*11 }

	office := newDoorVisitor("127.0.0.200", false, "")
	got := burst(office, key, budget*3/2)
	t.Logf("per-credential budget %d: a burst of %d over %d pods: %v", budget, budget*3/2, len(fd.pods), got)
	if !within(got[http.StatusOK], budget) || got[http.StatusOK]+got[http.StatusTooManyRequests] != budget*3/2 {
		t.Errorf("e2e: a key with a budget of %d requests got %d answered and %d refused (429) over %d api pods: the budget must hold across pods (within 10 %%)",
			budget, got[http.StatusOK], got[http.StatusTooManyRequests], len(fd.pods))
	}

	prober := newDoorVisitor("127.0.0.201", false, "")
	got = burst(prober, "ps_e2e_not_a_key", failedBudget*3/2)
	t.Logf("failed-credential budget %d: %d wrong keys from one address: %v", failedBudget, failedBudget*3/2, got)
	if !within(got[http.StatusUnauthorized], failedBudget) || got[http.StatusUnauthorized]+got[http.StatusTooManyRequests] != failedBudget*3/2 {
		t.Errorf("e2e: %d wrong keys from one address: %d answered 401 and %d 429 over %d api pods: want 401 for the first %d (within 10 %%), 429 after",
			failedBudget*3/2, got[http.StatusUnauthorized], got[http.StatusTooManyRequests], len(fd.pods), failedBudget)
	}
	fresh := w.withNewKey(t, w.adv).APIKey
	for pod := range fd.pods {
		if status := prober.get(t, fd, "/api/v1/postbacks", fresh, pod); status != http.StatusOK {
			t.Errorf("e2e: a valid key from the address that sent wrong ones got %d from api pod %d, want 200", status, pod)
		}
		if status := office.get(t, fd, "/api/v1/postbacks", "ps_e2e_another_wrong_key", pod); status != http.StatusUnauthorized {
			t.Errorf("e2e: a wrong key from another address behind the same proxy got %d from api pod %d, want 401", status, pod)
		}
	}
}

// get sends an API request with key through the front door to api pod number pod and
// returns the status.
func (v *doorVisitor) get(t *testing.T, fd *frontDoor, path, key string, pod int) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, fd.url+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("x-api-key", key)
	req.Header.Set(podHeader, strconv.Itoa(pod%len(fd.pods)))
	resp, err := v.hc.Do(req)
	if err != nil {
		t.Errorf("e2e: %s from %s: %v", path, v.addr, err)
		return 0
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}
