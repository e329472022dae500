// Command cluster runs a local single-node Kubernetes cluster that runs pods, for `make
// cluster` and `make e2e`: etcd, kube-apiserver, kube-controller-manager, kube-scheduler,
// kubelet, kube-proxy and CoreDNS (built from source by hack/envtest.sh and
// hack/kube-node.sh) with containerd, runc and the CNI plugins from Debian.
//
//	cluster up   --dir .local/cluster --assets bin/k8s --images bin/image.tar,bin/pause.tar
//	cluster down --dir .local/cluster
//
// `up` starts every process detached (each in its own session, logging to <dir>/logs), waits
// until the node is Ready and DNS answers, imports the image tarballs into containerd, and
// returns; the cluster keeps running. `down` stops it and puts the machine back as `up` found
// it: no process, mount, network namespace, address, bridge, iptables rule or changed kernel
// setting is left (it checks, and fails naming what it could not undo).
//
// Network. Everything stays on this machine. The node's address (nodeIP) sits on lo as a /32,
// so the API server, the kubelet and the host services the chart uses (Postgres, ClickHouse,
// Kafka) can bind to it before any pod exists; pods live on a bridge with a private range,
// services on another. A FORWARD rule drops anything a pod sends that would leave through
// another interface, and the bridge does no masquerading, so no pod traffic can leave the
// machine. CoreDNS answers cluster names only (no forwarder).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// The cluster's private network; none of it leaves the machine.
const (
	nodeIP      = "10.213.0.1"
	podCIDR     = "10.214.0.0/24"
	podGateway  = "10.214.0.1"
	serviceCIDR = "10.215.0.0/24"
	apiService  = "10.215.0.1" // the first address of serviceCIDR: the `kubernetes` Service
	bridgeName  = "psbr0"
	cniNetwork  = "partnerstream-local"
	nodeName    = "partnerstream-local"
	apiPort     = 6443
	egressChain = "PARTNERSTREAM-EGRESS"
)

// layout names the files of a cluster under its state directory.
type layout struct {
	dir, assets string
}

func (l layout) path(parts ...string) string {
	return filepath.Join(append([]string{l.dir}, parts...)...)
}
func (l layout) pki() string             { return l.path("pki") }
func (l layout) bin(name string) string  { return filepath.Join(l.assets, name) }
func (l layout) containerdSock() string  { return l.path("containerd", "containerd.sock") }
func (l layout) adminKubeconfig() string { return l.path("kubeconfig") }

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	fs := flag.NewFlagSet("cluster "+os.Args[1], flag.ExitOnError)
	dir := fs.String("dir", ".local/cluster", "state directory of the cluster")
	assets := fs.String("assets", "bin/k8s", "directory of the Kubernetes binaries, etcd and CoreDNS")
	images := fs.String("images", "", "up: comma-separated OCI image tarballs to import into containerd")
	pauseImage := fs.String("pause-image", "registry.k8s.io/pause:3.10", "up: name of the sandbox image (imported from --images)")
	timeout := fs.Duration("timeout", 5*time.Minute, "how long up may take")
	_ = fs.Parse(os.Args[2:])

	absDir, err := filepath.Abs(*dir)
	check(err)
	absAssets, err := filepath.Abs(*assets)
	check(err)
	l := layout{dir: absDir, assets: absAssets}

	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	switch os.Args[1] {
	case "up":
		ctx, cancelUp := context.WithTimeout(ctx, *timeout)
		defer cancelUp()
		var tarballs []string
		if *images != "" {
			tarballs = strings.Split(*images, ",")
		}
		if err := up(ctx, l, tarballs, *pauseImage); err != nil {
			fmt.Fprintf(os.Stderr, "cluster up: %v\n(logs in %s; `cluster down` cleans up)\n", err, l.path("logs"))
			os.Exit(1)
		}
	case "down":
		if err := down(context.WithoutCancel(ctx), l); err != nil {
			fmt.Fprintf(os.Stderr, "cluster down: %v\n", err)
			os.Exit(1)
		}
	default:
		usage()
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: cluster up|down [--dir DIR] [--assets DIR] [--images A.tar,B.tar]")
	os.Exit(2)
}

func check(err error) {
	if err != nil {
		fmt.Fprintf(os.Stderr, "cluster: %v\n", err)
		os.Exit(1)
	}
}

func step(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "cluster: "+format+"\n", args...)
}

// errs joins what went wrong during a teardown that goes on after each failure.
type errs []error

func (e *errs) add(what string, err error) {
	if err != nil {
		*e = append(*e, fmt.Errorf("%s: %w", what, err))
	}
}

func (e errs) err() error { return errors.Join(e...) }
