// Command kafka runs the embedded Kafka-protocol broker (internal/kafka/embedded) as a
// process of its own, on a fixed loopback port and with a data directory, so that a test can
// SIGKILL the broker and start it again on the same address and data while the components
// that use it keep running (`partnerstream dev` embeds the broker in the same process, so it
// cannot be killed separately).
//
//	go run ./hack/kafka --addr 127.0.0.1:19092 --data-dir .local/journey-kafka
//
// It prints one line to stdout once the broker accepts connections,
//
//	kafka: ready on 127.0.0.1:19092
//
// and stops cleanly (flushing its data) on SIGTERM or SIGINT.
package main

import (
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/partnerstream/partnerstream/internal/kafka/embedded"
)

func main() {
	addr := flag.String("addr", "", "loopback host:port to listen on (required: a restart must find the same address)")
	dataDir := flag.String("data-dir", "", "data directory; the broker resumes from it after a restart (required)")
	verbose := flag.Bool("v", false, "log the broker's requests to stderr")
	anyHost := flag.Bool("any-host", false, "allow an --addr other than loopback (a local cluster's node address; the broker has no authentication)")
	flag.Parse()
	if *addr == "" || *dataDir == "" {
		fmt.Fprintln(os.Stderr, "kafka: --addr and --data-dir are required")
		os.Exit(2)
	}
	level := slog.LevelWarn
	if *verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level})).With("component", "kafka")

	b, err := embedded.Start(embedded.Options{Addr: *addr, DataDir: *dataDir, Logger: log, AnyHost: *anyHost})
	if err != nil {
		fmt.Fprintf(os.Stderr, "kafka: %v\n", err)
		os.Exit(1)
	}
	fmt.Printf("kafka: ready on %s\n", b.Addrs()[0])

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
	b.Close()
}
