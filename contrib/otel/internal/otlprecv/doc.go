// Package otlprecv is a real OTLP trace receiver for tests: a gRPC server
// implementing the collector's TraceService and an HTTP server decoding
// OTLP/HTTP protobuf at /v1/traces, both on loopback, keeping every span
// they receive.
//
// It stands in for an OpenTelemetry collector so that tests of the OTLP
// export check what actually crosses the wire (go.opentelemetry.io/proto/otlp
// messages), not what an in-process exporter was handed.
package otlprecv
