// Package otlptest is a real OTLP trace receiver for tests: a gRPC server
// implementing the collector's TraceService and an HTTP server decoding
// OTLP/HTTP protobuf at /v1/traces, both on loopback, keeping every span
// they receive.
//
// It stands in for an OpenTelemetry collector so that tests of the OTLP
// export check what actually crosses the wire (go.opentelemetry.io/proto/otlp
// messages), not what an in-process exporter was handed. kvroute's own
// binaries that export traces (kvroute-gateway's OTLP build in this module,
// the kvroute-epp picker in contrib/extproc) test against it, and a gateway
// that embeds kvroute can do the same.
package otlptest
