package main

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
)

// writeConfig makes the PKI, the kubeconfigs and the configuration files of every process.
func writeConfig(l layout) error {
	for _, d := range []string{l.pki(), l.path("etcd"), l.path("containerd"), l.path("kubelet"), l.path("cni", "net.d"),
		l.path("cni", "ipam"), l.path("pod-logs"), l.path("runc")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	ca, err := newAuthority("partnerstream-local-ca")
	if err != nil {
		return err
	}
	if err := ca.save(l.pki(), "ca"); err != nil {
		return err
	}
	// A CA of its own for webhook receivers on this machine (tests, a developer's endpoint):
	// the deliver pods trust it through the chart's egress.caBundle.
	receivers, err := newAuthority("partnerstream-local-receivers")
	if err != nil {
		return err
	}
	if err := receivers.save(l.pki(), "receiver-ca"); err != nil {
		return err
	}
	node := net.ParseIP(nodeIP)
	leaves := map[string]leaf{
		"apiserver": {cn: "kube-apiserver", server: true, ips: []net.IP{node, net.ParseIP(apiService), net.ParseIP("127.0.0.1")},
			dns: []string{"kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local", "localhost"}},
		"apiserver-kubelet-client": {cn: "kube-apiserver-kubelet-client", orgs: []string{"system:masters"}, client: true},
		"admin":                    {cn: "kubernetes-admin", orgs: []string{"system:masters"}, client: true},
		"kube-controller-manager":  {cn: "system:kube-controller-manager", client: true},
		"kube-scheduler":           {cn: "system:kube-scheduler", client: true},
		"kube-proxy":               {cn: "system:kube-proxy", client: true},
		"kubelet":                  {cn: "system:node:" + nodeName, orgs: []string{"system:nodes"}, client: true},
		"kubelet-serving":          {cn: nodeName, server: true, ips: []net.IP{node}, dns: []string{nodeName}},
	}
	for name, lf := range leaves {
		if err := ca.issue(l.pki(), name, lf); err != nil {
			return err
		}
	}
	if err := serviceAccountKeys(l.pki()); err != nil {
		return err
	}
	server := fmt.Sprintf("https://%s:%d", nodeIP, apiPort)
	for _, user := range []string{"admin", "kube-controller-manager", "kube-scheduler", "kube-proxy", "kubelet"} {
		path := l.path(user + ".kubeconfig")
		if user == "admin" {
			path = l.adminKubeconfig()
		}
		if err := kubeconfig(path, server, l.pki(), user); err != nil {
			return err
		}
	}
	files := map[string]string{
		l.path("containerd", "config.toml"):      containerdConfig(l),
		l.path("kubelet", "config.yaml"):         kubeletConfig(l),
		l.path("kubelet", "resolv.conf"):         "nameserver " + nodeIP + "\n",
		l.path("kube-proxy.yaml"):                kubeProxyConfig(l),
		l.path("cni", "net.d", "10-ps.conflist"): cniConfig(l),
		l.path("Corefile"):                       corefile(l),
	}
	for path, content := range files {
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// containerdConfig keeps every containerd path under the state directory. Two settings are
// required on this machine: restrict_oom_score_adj (without CAP_SYS_RESOURCE runc cannot
// raise a container's oom_score_adj, and every pod fails with "can't get final child's PID
// from pipe"), and netns_mounts_under_state_dir (pod network namespaces under our directory,
// not /var/run/netns).
func containerdConfig(l layout) string {
	return fmt.Sprintf(`version = 2
root = %q
state = %q
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]

[grpc]
  address = %q
[ttrpc]
  address = %q
[metrics]
  address = ""

[plugins."io.containerd.internal.v1.opt"]
  path = %q

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "registry.k8s.io/pause:3.10"
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = %q
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = %q
`, l.path("containerd", "root"), l.path("containerd", "state"), l.containerdSock(), l.containerdSock()+".ttrpc",
		l.path("containerd", "opt"), l.path("runc"), l.path("cni", "net.d"))
}

// kubeletConfig: cgroupfs on a cgroup v1 host (kubelet 1.37 refuses v1 unless failCgroupV1 is
// false), no swap check, and image garbage collection off: there is no registry to pull an
// image back from.
func kubeletConfig(l layout) string {
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: %s
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: %s}
authorization: {mode: Webhook}
tlsCertFile: %s
tlsPrivateKeyFile: %s
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
containerRuntimeEndpoint: unix://%s
clusterDNS: [%s]
clusterDomain: cluster.local
resolvConf: %s
podLogsDir: %s
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: 100Mi, nodefs.available: 1%%, imagefs.available: 1%%, nodefs.inodesFree: 1%%}
maxPods: 40
serializeImagePulls: false
`, nodeIP, filepath.Join(l.pki(), "ca.crt"), filepath.Join(l.pki(), "kubelet-serving.crt"), filepath.Join(l.pki(), "kubelet-serving.key"),
		l.containerdSock(), nodeIP, l.path("kubelet", "resolv.conf"), l.path("pod-logs"))
}

// kubeProxyConfig: iptables mode; conntrack limits and route_localnet left as they are.
func kubeProxyConfig(l layout) string {
	return fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: %s}
mode: iptables
clusterCIDR: %s
hostnameOverride: %s
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
nodePortAddresses: [%s/32]
iptables: {localhostNodePorts: false}
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
`, l.path("kube-proxy.kubeconfig"), podCIDR, nodeName, nodeIP)
}

// cniConfig: a bridge on a private range, no masquerade (pods cannot reach past the machine).
func cniConfig(l layout) string {
	return fmt.Sprintf(`{
  "cniVersion": "0.4.0",
  "name": %q,
  "plugins": [{
    "type": "bridge", "bridge": %q, "isGateway": true, "ipMasq": false, "hairpinMode": true,
    "ipam": {"type": "host-local", "dataDir": %q,
      "ranges": [[{"subnet": %q, "gateway": %q}]], "routes": [{"dst": "0.0.0.0/0"}]}
  }]
}
`, cniNetwork, bridgeName, l.path("cni", "ipam"), podCIDR, podGateway)
}

// corefile: cluster names only; anything else gets no answer from outside the machine.
func corefile(l layout) string {
	return fmt.Sprintf(`.:53 {
    bind %s
    errors
    ready 127.0.0.1:18181
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        kubeconfig %s
        pods insecure
    }
    cache 5
}
`, nodeIP, l.adminKubeconfig())
}
