// Package gatewaycmd is the command line of kvroute's gateway (package
// gateway): flag parsing, configuration files (YAML or JSON), the server, the
// internal snapshot listener and graceful shutdown, as one Run function.
//
// It exists so that more than one binary can run the same gateway: the core
// module's cmd/kvroute-gateway calls Run without a TracerProvider, and the
// OpenTelemetry build of kvroute-gateway in the contrib/otel module calls it
// with a TracerProvider that exports OTLP. The OTLP exporters bring gRPC into
// the module graph, which the core module keeps out; this package only takes
// the provider, through the OpenTelemetry API.
//
// Configuration files are read with internal/yamldoc (sigs.k8s.io/yaml's
// YAML to JSON, then kvroute's strict JSON decoding); a file of more than
// one YAML document is refused rather than read as its first, as llmd.Load
// and kvroute-epp refuse it.
//
// The flags are documented in the cmd/kvroute-gateway command.
package gatewaycmd
