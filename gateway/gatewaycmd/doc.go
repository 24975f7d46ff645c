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
// Configuration files are read with sigs.k8s.io/yaml (YAML to JSON, then
// kvroute's strict JSON decoding). It reads a file's first document only, so
// go.yaml.in/yaml/v2, the YAML library it is built on and already in the
// module graph, is imported directly for one job: counting a file's
// documents, so that a second one is refused rather than dropped unread.
//
// The flags are documented in the cmd/kvroute-gateway command.
package gatewaycmd
