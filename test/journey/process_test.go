package journey

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// process is one component (or the broker) running as a child process. It can be killed with
// SIGKILL and started again with the same arguments, which is what the fault runs do.
type process struct {
	t       testing.TB
	name    string
	bin     string
	args    []string
	logPath string
	// ready answers nil once the process serves; it is polled after each start.
	ready func(ctx context.Context) error

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
	// starts counts the starts, for the log.
	starts int
}

func (p *process) start() {
	p.t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil {
		p.t.Fatalf("journey: %s is already running", p.name)
	}
	log, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		p.t.Fatalf("journey: %s log: %v", p.name, err)
	}
	p.starts++
	fmt.Fprintf(log, "--- journey: start #%d at %s: %s %s\n", p.starts, time.Now().Format(time.RFC3339Nano), p.bin, strings.Join(p.args, " "))
	cmd := exec.Command(p.bin, p.args...)
	cmd.Stdout, cmd.Stderr = log, log
	// The child dies with the test binary even if the test is killed before its cleanup.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = log.Close()
		p.t.Fatalf("journey: start %s: %v", p.name, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); _ = log.Close(); close(done) }()
	p.cmd, p.done = cmd, done
}

// waitReady polls the readiness check until it passes, failing the test after timeout or
// when the process exits.
func (p *process) waitReady(timeout time.Duration) {
	p.t.Helper()
	p.mu.Lock()
	done := p.done
	p.mu.Unlock()
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		select {
		case <-done:
			p.t.Fatalf("journey: %s exited during start:\n%s", p.name, p.tail(30))
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		last = p.ready(ctx)
		cancel()
		if last == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	p.t.Fatalf("journey: %s not ready within %v: %v\n%s", p.name, timeout, last, p.tail(30))
}

// signal sends sig and, for SIGKILL, waits until the process is gone.
func (p *process) signal(sig syscall.Signal, wait time.Duration) {
	p.t.Helper()
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.cmd = nil
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(sig)
	select {
	case <-done:
	case <-time.After(wait):
		_ = cmd.Process.Kill()
		<-done
	}
}

// kill is the crash of the fault runs: SIGKILL, no chance to flush anything.
func (p *process) kill() { p.signal(syscall.SIGKILL, 10*time.Second) }

// stop is a graceful shutdown, SIGKILL after 15 s.
func (p *process) stop() { p.signal(syscall.SIGTERM, 15*time.Second) }

// pid is the running process's id (0 when it is not running).
func (p *process) pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// tail returns the last n lines of the process's log.
func (p *process) tail(n int) string {
	b, _ := os.ReadFile(p.logPath)
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

// httpReady is a readiness check that wants 200 from url.
func httpReady(url string) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s: %s", url, resp.Status)
		}
		return nil
	}
}

// tcpReady is a readiness check that wants a TCP connection to addr.
func tcpReady(addr string) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		if err != nil {
			return err
		}
		return c.Close()
	}
}

// logDir is where the processes' logs go: kept under JOURNEY_LOG_DIR when set (CI uploads
// it), otherwise in the test's temporary directory.
func logDir(t testing.TB) string {
	t.Helper()
	if d := os.Getenv("JOURNEY_LOG_DIR"); d != "" {
		dir := filepath.Join(d, strings.ReplaceAll(t.Name(), "/", "_"))
		if err := os.MkdirAll(dir, 0o750); err != nil {
			t.Fatalf("journey: log dir: %v", err)
		}
		return dir
	}
	return t.TempDir()
}
