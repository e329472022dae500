// Package delivery sends signed webhooks and postbacks with durable retries. The sending loop
// arrives with the delivery work; until then the component holds its connections so that its
// readiness reflects Postgres and Kafka.
package delivery

import "context"

// Service is the deliver component.
type Service struct{}

// Name implements run.Component.
func (Service) Name() string { return "deliver" }

// Run waits for shutdown.
func (Service) Run(ctx context.Context) error {
	<-ctx.Done()
	return nil
}
