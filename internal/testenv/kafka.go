package testenv

import (
	"testing"

	"github.com/partnerstream/partnerstream/internal/kafka/embedded"
)

// Kafka starts an in-memory embedded Kafka broker on a free loopback port for this test
// alone and returns its bootstrap addresses. Unlike Postgres and ClickHouse it needs no
// external service, so it never skips. The broker has no topics: create them with
// kafka.EnsureTopics (replication factor 1).
func Kafka(t testing.TB) []string {
	t.Helper()
	b, err := embedded.Start(embedded.Options{Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatalf("testenv: start embedded kafka: %v", err)
	}
	t.Cleanup(b.Close)
	return b.Addrs()
}
