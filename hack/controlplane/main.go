// Command controlplane runs a local Kubernetes control plane (etcd and kube-apiserver: no
// nodes, no controller-manager) for `make run`, on top of controller-runtime's envtest.
//
//	go run ./hack/controlplane [--assets bin/k8s] [--dir .local/kube] \
//	    [--kubeconfig .local/kubeconfig] [--crds config/crd/bases]
//
// The binaries come from --assets (hack/envtest.sh builds them). etcd keeps its data in
// <dir>/etcd, so objects survive a restart; everything else is new on every start: ports,
// CA, certificates and the service-account signing key (tokens issued before a restart stop
// working). When the API server is ready the CRDs found in --crds are applied (a missing or
// empty directory is skipped; CRDs stay in etcd when their file goes away), an admin
// kubeconfig (system:masters, client certificate valid for 7 days) is written to
// --kubeconfig, and one line goes to stdout, with the absolute path:
//
//	controlplane: ready, kubeconfig at <path>
//
// Logs go to stderr; etcd and kube-apiserver write to <dir>/etcd.log and
// <dir>/kube-apiserver.log (truncated at every start).
//
// Stopping. SIGINT or SIGTERM stops kube-apiserver, then etcd (envtest signals each one's
// process group, SIGKILL after 15 s) and removes the kubeconfig. A second signal exits at
// once; so does a SIGKILL of this process. For those cases each binary runs under a guard:
// this same executable, started through a symlink <dir>/bin/<binary>, which runs the real
// binary as its child. When the guard sees that this process is gone (it polls its own parent
// pid every 200 ms) it sends the child SIGTERM, and SIGKILL 5 s later (etcd can take that long
// to drain a dying API server's streams): nothing outlives the control plane by more than
// about 5 s. A guard itself ignores SIGINT and SIGTERM (its child gets them through the
// process group, which is how envtest stops it), so signal this process, not the guards.
// Under `go run`, Ctrl-C reaches this process (same process group), but a SIGTERM sent to the
// go command alone is not forwarded: scripts should run the built binary.
//
// A lock on <dir>/controlplane.lock keeps a second instance off the same data directory.
// etcd runs with envtest's --unsafe-no-fsync: the data survives any process crash, but not
// necessarily a machine crash; if etcd then refuses to start, delete <dir>/etcd.
package main

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

const (
	// envAssets and envParent tell a guard where the real binaries are and which process
	// it protects; they are set by the control plane for its children only.
	envAssets = "PARTNERSTREAM_CONTROLPLANE_ASSETS"
	envParent = "PARTNERSTREAM_CONTROLPLANE_PID"

	startTimeout = 60 * time.Second // per process; the first start of a new etcd is the slowest
	stopTimeout  = 15 * time.Second // per process, then envtest sends SIGKILL
)

// binaries are the envtest assets this tool runs, each through a guard.
var binaries = []string{"etcd", "kube-apiserver"}

type options struct {
	assets, dir, kubeconfig, crds string
}

func main() {
	if name, ok := guardName(); ok {
		os.Exit(runGuard(name))
	}

	// An own FlagSet: controller-runtime registers --kubeconfig on flag.CommandLine.
	var o options
	fs := flag.NewFlagSet(filepath.Base(os.Args[0]), flag.ExitOnError)
	fs.StringVar(&o.assets, "assets", "bin/k8s", "directory with the kube-apiserver and etcd binaries (hack/envtest.sh)")
	fs.StringVar(&o.dir, "dir", ".local/kube", "state directory; etcd data lives in <dir>/etcd")
	fs.StringVar(&o.kubeconfig, "kubeconfig", ".local/kubeconfig", "where to write the admin kubeconfig")
	fs.StringVar(&o.crds, "crds", "config/crd/bases", "directory of CRD manifests to install (skipped when missing or empty)")
	_ = fs.Parse(os.Args[1:])
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "unexpected arguments: %q\n", fs.Args())
		os.Exit(2)
	}

	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	slog.SetDefault(logger)
	ctrllog.SetLogger(logr.FromSlogHandler(logger.Handler()))

	if err := run(o); err != nil {
		slog.Error("controlplane failed", "err", err)
		os.Exit(1)
	}
}

// run starts the control plane, reports readiness and stops it on the first SIGINT/SIGTERM.
func run(o options) error {
	if err := o.absolute(); err != nil {
		return err
	}
	if err := os.MkdirAll(o.dir, 0o755); err != nil {
		return err
	}
	unlock, err := lockDir(o.dir)
	if err != nil {
		return err
	}
	defer unlock()

	// Signals are watched from the start: envtest's Start cannot be interrupted, so a signal
	// that arrives during it stops the control plane as soon as it is up.
	stop := watchSignals()

	env, err := newEnvironment(o)
	if err != nil {
		return err
	}
	began := time.Now()
	if _, err := env.Start(); err != nil {
		_ = env.Stop() // a failure after the processes came up (CRDs) leaves them running
		return fmt.Errorf("start (process logs in %s): %w", o.dir, err)
	}
	slog.Info("control plane started", "took", time.Since(began).Round(time.Millisecond),
		"apiserver", env.Config.Host, "crds", len(env.CRDs))

	if err := writeKubeconfig(env, o.kubeconfig); err != nil {
		_ = env.Stop()
		return err
	}
	select {
	case <-stop: // signalled while starting: stop without announcing readiness
	default:
		fmt.Printf("controlplane: ready, kubeconfig at %s\n", o.kubeconfig)
		<-stop
	}
	began = time.Now()
	err = env.Stop()
	_ = os.Remove(o.kubeconfig)
	_ = os.RemoveAll(filepath.Join(o.dir, "pki"))
	if err != nil {
		return fmt.Errorf("stop: %w", err)
	}
	slog.Info("control plane stopped", "took", time.Since(began).Round(time.Millisecond))
	return nil
}

// absolute resolves the paths against the working directory: the guards and the binaries
// get them through the environment and flags.
func (o *options) absolute() error {
	for _, p := range []*string{&o.assets, &o.dir, &o.kubeconfig, &o.crds} {
		abs, err := filepath.Abs(*p)
		if err != nil {
			return err
		}
		*p = abs
	}
	return nil
}

// newEnvironment prepares the envtest environment: guards, data and certificate directories,
// process logs, CRDs. It also removes a kubeconfig left by a run that was killed.
func newEnvironment(o options) (*envtest.Environment, error) {
	guards, err := installGuards(o)
	if err != nil {
		return nil, err
	}
	if err := os.Remove(o.kubeconfig); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	// envtest only generates certificates into an empty directory, and wants new ones per start.
	pki := filepath.Join(o.dir, "pki")
	if err := os.RemoveAll(pki); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(pki, 0o700); err != nil {
		return nil, err
	}
	etcdLog, err := os.Create(filepath.Join(o.dir, "etcd.log"))
	if err != nil {
		return nil, err
	}
	apiLog, err := os.Create(filepath.Join(o.dir, "kube-apiserver.log"))
	if err != nil {
		return nil, err
	}

	never := false
	env := &envtest.Environment{
		BinaryAssetsDirectory: o.assets,
		UseExistingCluster:    &never, // ignore USE_EXISTING_CLUSTER from the environment
		ControlPlane: envtest.ControlPlane{
			Etcd: &envtest.Etcd{
				Path:    guards["etcd"],
				DataDir: filepath.Join(o.dir, "etcd"),
				Out:     etcdLog,
				Err:     etcdLog,
			},
			APIServer: &envtest.APIServer{
				Path:    guards["kube-apiserver"],
				CertDir: pki,
				Out:     apiLog,
				Err:     apiLog,
			},
		},
		ControlPlaneStartTimeout: startTimeout,
		ControlPlaneStopTimeout:  stopTimeout,
	}
	if hasManifests(o.crds) {
		env.CRDDirectoryPaths = []string{o.crds}
		env.ErrorIfCRDPathMissing = true
	}
	return env, nil
}

// writeKubeconfig provisions an admin (system:masters) user and writes its kubeconfig
// atomically, so a reader never sees half a file.
func writeKubeconfig(env *envtest.Environment, path string) error {
	user, err := env.AddUser(envtest.User{Name: "admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return fmt.Errorf("provision admin user: %w", err)
	}
	data, err := user.KubeConfig()
	if err != nil {
		return fmt.Errorf("render kubeconfig: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// hasManifests reports whether dir holds at least one file envtest reads as a CRD manifest.
func hasManifests(dir string) bool {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, e := range entries {
		switch filepath.Ext(e.Name()) {
		case ".yaml", ".yml", ".json":
			if !e.IsDir() {
				return true
			}
		}
	}
	return false
}

// lockDir takes an exclusive lock on dir, so two control planes never share one etcd data
// directory. The kernel drops the lock when this process ends, however it ends.
func lockDir(dir string) (unlock func(), err error) {
	f, err := os.OpenFile(filepath.Join(dir, "controlplane.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s is in use by another controlplane: %w", dir, err)
	}
	return func() { f.Close() }, nil
}

// watchSignals returns a channel closed on the first SIGINT or SIGTERM. A second signal
// exits at once; the guards then stop etcd and kube-apiserver.
func watchSignals() <-chan struct{} {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	stop := make(chan struct{})
	go func() {
		slog.Info("stopping control plane", "signal", (<-sigs).String())
		close(stop)
		slog.Warn("exiting now; the guards stop etcd and kube-apiserver", "signal", (<-sigs).String())
		os.Exit(1)
	}()
	return stop
}

// installGuards points <dir>/bin/<binary> at this executable and tells the children, through
// the environment, where the real binaries are and which process they belong to.
func installGuards(o options) (map[string]string, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	binDir := filepath.Join(o.dir, "bin")
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		return nil, err
	}
	guards := map[string]string{}
	for _, name := range binaries {
		if _, err := os.Stat(filepath.Join(o.assets, name)); err != nil {
			return nil, fmt.Errorf("%s not found in %s (build it with hack/envtest.sh): %w", name, o.assets, err)
		}
		link := filepath.Join(binDir, name)
		if err := os.Remove(link); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
		if err := os.Symlink(self, link); err != nil {
			return nil, err
		}
		guards[name] = link
	}
	if err := os.Setenv(envAssets, o.assets); err != nil {
		return nil, err
	}
	return guards, os.Setenv(envParent, strconv.Itoa(os.Getpid()))
}

// guardName reports whether this process was started as a guard, and for which binary.
func guardName() (string, bool) {
	if os.Getenv(envAssets) == "" {
		return "", false
	}
	name := filepath.Base(os.Args[0])
	for _, b := range binaries {
		if name == b {
			return name, true
		}
	}
	return "", false
}

// runGuard runs the real binary as a child, with the same arguments and output, and returns
// its exit code. When the control plane process disappears (even by SIGKILL) the guard is
// re-parented; it notices within pollEvery and stops the child: SIGTERM, then SIGKILL.
func runGuard(name string) int {
	const pollEvery, killAfter = 200 * time.Millisecond, 5 * time.Second
	parent := os.Getppid()
	if want, err := strconv.Atoi(os.Getenv(envParent)); err == nil && want != parent {
		return 1 // the control plane died before the guard started
	}
	// envtest signals the whole process group, which the child shares: the guard lets the
	// child handle SIGINT/SIGTERM and waits for it. (Notify, not Ignore: an ignored signal
	// would stay ignored in the child.)
	signal.Notify(make(chan os.Signal, 1), os.Interrupt, syscall.SIGTERM)

	cmd := exec.Command(filepath.Join(os.Getenv(envAssets), name), os.Args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "controlplane guard: %v\n", err)
		return 127
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()

	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	var kill <-chan time.Time
	for {
		select {
		case <-exited:
			return cmd.ProcessState.ExitCode()
		case <-tick.C:
			if kill == nil && os.Getppid() != parent {
				fmt.Fprintf(os.Stderr, "controlplane guard: control plane (pid %d) is gone, stopping %s\n", parent, name)
				_ = cmd.Process.Signal(syscall.SIGTERM)
				kill = time.After(killAfter)
			}
		case <-kill:
			_ = cmd.Process.Kill()
		}
	}
}
