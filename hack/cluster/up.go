package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// up starts the cluster; on failure the processes already started keep running for the logs
// and `down` removes them.
func up(ctx context.Context, l layout, images []string, pauseImage string) error {
	if _, err := os.Stat(l.snapshotPath()); err == nil {
		return fmt.Errorf("a cluster in %s is already up (or was not torn down): run `make cluster-down` first", l.dir)
	}
	// The node address and the bridge belong to the machine, not to a checkout: a cluster of
	// another checkout holds them, and starting beside it would take its host state for the
	// one to restore.
	if hasNodeAddress() || linkExists(bridgeName) {
		return fmt.Errorf("another cluster runs on this machine (%s is on lo or the bridge %s exists): "+
			"run `make cluster-down` in its checkout first", nodeIP, bridgeName)
	}
	for _, b := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet", "kube-proxy", "coredns"} {
		if _, err := os.Stat(l.bin(b)); err != nil {
			return fmt.Errorf("%s: %w (hack/envtest.sh and hack/kube-node.sh build it)", b, err)
		}
	}
	if err := os.MkdirAll(l.dir, 0o755); err != nil {
		return err
	}
	began := time.Now()
	before, err := takeSnapshot()
	if err != nil {
		return fmt.Errorf("snapshot of the host: %w", err)
	}
	if err := saveSnapshot(l, before); err != nil {
		return err
	}
	if err := writeConfig(l); err != nil {
		return fmt.Errorf("configuration: %w", err)
	}
	if err := setUpNetwork(); err != nil {
		return fmt.Errorf("network: %w", err)
	}

	etcdPort, err := freePort()
	if err != nil {
		return err
	}
	etcdURL := "http://127.0.0.1:" + strconv.Itoa(etcdPort)
	peerPort, err := freePort()
	if err != nil {
		return err
	}
	step("starting etcd")
	if err := start(l, "etcd", l.bin("etcd"), "--data-dir", l.path("etcd"), "--name", nodeName,
		"--listen-client-urls", etcdURL, "--advertise-client-urls", etcdURL,
		"--listen-peer-urls", "http://127.0.0.1:"+strconv.Itoa(peerPort), "--initial-advertise-peer-urls", "http://127.0.0.1:"+strconv.Itoa(peerPort),
		"--initial-cluster", nodeName+"=http://127.0.0.1:"+strconv.Itoa(peerPort), "--unsafe-no-fsync", "--log-level", "warn"); err != nil {
		return err
	}
	if err := waitFor(ctx, "etcd", httpOK(http.DefaultClient, etcdURL+"/health")); err != nil {
		return err
	}

	step("starting kube-apiserver")
	pki := func(name string) string { return l.pki() + "/" + name }
	if err := start(l, "kube-apiserver", l.bin("kube-apiserver"),
		"--etcd-servers", etcdURL, "--bind-address", nodeIP, "--advertise-address", nodeIP, "--secure-port", strconv.Itoa(apiPort),
		"--service-cluster-ip-range", serviceCIDR, "--client-ca-file", pki("ca.crt"),
		"--tls-cert-file", pki("apiserver.crt"), "--tls-private-key-file", pki("apiserver.key"),
		"--service-account-issuer", "https://kubernetes.default.svc.cluster.local", "--service-account-key-file", pki("sa.pub"),
		"--service-account-signing-key-file", pki("sa.key"), "--authorization-mode", "Node,RBAC",
		"--enable-admission-plugins", "NodeRestriction", "--allow-privileged=true",
		"--kubelet-client-certificate", pki("apiserver-kubelet-client.crt"), "--kubelet-client-key", pki("apiserver-kubelet-client.key"),
		"--kubelet-certificate-authority", pki("ca.crt"), "--kubelet-preferred-address-types", "InternalIP",
		"--profiling=false", "--v=1"); err != nil {
		return err
	}
	admin, err := clientcmd.BuildConfigFromFlags("", l.adminKubeconfig())
	if err != nil {
		return err
	}
	kube, err := kubernetes.NewForConfig(admin)
	if err != nil {
		return err
	}
	if err := waitFor(ctx, "kube-apiserver", func(ctx context.Context) error {
		_, err := kube.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err
	}); err != nil {
		return err
	}

	step("starting kube-controller-manager and kube-scheduler")
	if err := start(l, "kube-controller-manager", l.bin("kube-controller-manager"),
		"--kubeconfig", l.path("kube-controller-manager.kubeconfig"),
		"--authentication-kubeconfig", l.path("kube-controller-manager.kubeconfig"),
		"--authorization-kubeconfig", l.path("kube-controller-manager.kubeconfig"),
		"--bind-address", "127.0.0.1", "--secure-port", "0", "--leader-elect=false",
		"--service-account-private-key-file", pki("sa.key"), "--root-ca-file", pki("ca.crt"),
		"--use-service-account-credentials=true", "--service-cluster-ip-range", serviceCIDR, "--v=1"); err != nil {
		return err
	}
	if err := start(l, "kube-scheduler", l.bin("kube-scheduler"),
		"--kubeconfig", l.path("kube-scheduler.kubeconfig"),
		"--authentication-kubeconfig", l.path("kube-scheduler.kubeconfig"),
		"--authorization-kubeconfig", l.path("kube-scheduler.kubeconfig"),
		"--bind-address", "127.0.0.1", "--secure-port", "0", "--leader-elect=false", "--v=1"); err != nil {
		return err
	}

	step("starting containerd")
	if err := start(l, "containerd", "containerd", "--config", l.path("containerd", "config.toml")); err != nil {
		return err
	}
	if err := waitFor(ctx, "containerd", func(context.Context) error {
		_, err := sh("ctr", "--address", l.containerdSock(), "version")
		return err
	}); err != nil {
		return err
	}
	for _, img := range images {
		step("importing %s", img)
		if _, err := sh("ctr", "--address", l.containerdSock(), "-n", "k8s.io", "images", "import", "--no-unpack=false", img); err != nil {
			return err
		}
	}
	if len(images) > 0 {
		if out, err := sh("ctr", "--address", l.containerdSock(), "-n", "k8s.io", "images", "ls", "-q"); err != nil || !containsLine(out, pauseImage) {
			return fmt.Errorf("the sandbox image %s is not among the imported images:\n%s", pauseImage, out)
		}
	}

	step("starting kubelet, kube-proxy and CoreDNS")
	if err := start(l, "kubelet", l.bin("kubelet"), "--config", l.path("kubelet", "config.yaml"),
		"--kubeconfig", l.path("kubelet.kubeconfig"), "--root-dir", l.path("kubelet", "root"),
		"--hostname-override", nodeName, "--node-ip", nodeIP, "--v=1"); err != nil {
		return err
	}
	if err := start(l, "kube-proxy", l.bin("kube-proxy"), "--config", l.path("kube-proxy.yaml"), "--v=1"); err != nil {
		return err
	}
	if err := start(l, "coredns", l.bin("coredns"), "-conf", l.path("Corefile")); err != nil {
		return err
	}
	if err := waitFor(ctx, "the node", func(ctx context.Context) error {
		n, err := kube.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				return nil
			}
		}
		return errors.New("node not Ready")
	}); err != nil {
		return err
	}
	if err := waitFor(ctx, "CoreDNS", resolves("kubernetes.default.svc.cluster.local", apiService)); err != nil {
		return err
	}
	// kube-proxy and the kubelet have put their own rules at the top of FORWARD by now.
	if err := waitFor(ctx, "kube-proxy", httpOK(http.DefaultClient, "http://127.0.0.1:10256/healthz")); err != nil {
		return err
	}
	if err := guardEgress(); err != nil {
		return fmt.Errorf("egress guard: %w", err)
	}
	step("ready in %s; kubeconfig at %s", time.Since(began).Round(time.Second), l.adminKubeconfig())
	return nil
}

func containsLine(out, want string) bool {
	return slices.Contains(strings.Split(out, "\n"), want)
}

func httpOK(c *http.Client, url string) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := c.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s: %s", url, resp.Status)
		}
		return nil
	}
}

// resolves asks CoreDNS (on the node address) for name and expects addr.
func resolves(name, addr string) func(ctx context.Context) error {
	r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, net.JoinHostPort(nodeIP, "53"))
	}}
	return func(ctx context.Context) error {
		addrs, err := r.LookupHost(ctx, name)
		if err != nil {
			return err
		}
		for _, a := range addrs {
			if a == addr {
				return nil
			}
		}
		return fmt.Errorf("%s resolves to %v, want %s", name, addrs, addr)
	}
}

func freePort() (int, error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer lis.Close()
	return lis.Addr().(*net.TCPAddr).Port, nil
}
