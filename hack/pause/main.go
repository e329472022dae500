// Command pause is the sandbox ("pause") process of the local cluster's pods: it holds a
// pod's namespaces, reaps the zombies it inherits as the pod's first process, and exits on
// SIGINT or SIGTERM. The upstream pause image cannot be pulled here (no registry), so
// `make cluster` builds this one into registry.k8s.io/pause:3.10 with hack/image.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sig := make(chan os.Signal, 8)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range sig {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			var ws syscall.WaitStatus
			if pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil); pid <= 0 || err != nil {
				break
			}
		}
	}
}
