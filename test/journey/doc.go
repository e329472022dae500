// Package journey runs the whole platform as separate processes (api, ingest, deliver,
// controller and a Kafka-protocol broker of its own) against the local Postgres, ClickHouse
// and a kube-apiserver, and drives it through the public HTTP API only: the user journey,
// fault runs (a broker, a store or a component killed mid-stream) and a soak. Everything is
// in the tests; see docs/reliability.md for what each run proves and the numbers measured.
package journey
