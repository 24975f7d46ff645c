// Package gatewaycmd is the command line of kvroute's example gateway: flag
// parsing, configuration files (YAML or JSON), the server, the internal
// snapshot listener and graceful shutdown, as one Run function.
//
// It exists so that more than one binary can run the same gateway: the
// plain example (examples/gateway) calls Run with zero Options, and the
// OpenTelemetry gateway of the contrib/otel module calls it with a
// TracerProvider that exports OTLP. The OTLP exporters bring gRPC into the
// module graph, which the core module keeps out; this package only takes
// the provider, through the OpenTelemetry API.
//
// The flags are documented in the examples/gateway command.
package gatewaycmd
