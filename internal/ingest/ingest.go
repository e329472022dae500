// Package ingest moves click and event streams from Kafka into ClickHouse for statistics.
// The consuming loop arrives with the statistics work; until then the component holds its
// connections so that its readiness reflects Kafka and ClickHouse.
package ingest

import "context"

// Service is the ingest component.
type Service struct{}

// Name implements run.Component.
func (Service) Name() string { return "ingest" }

// Run waits for shutdown.
func (Service) Run(ctx context.Context) error {
	<-ctx.Done()
	return nil
}
