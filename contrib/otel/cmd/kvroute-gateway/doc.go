// Command kvroute-gateway is the OpenTelemetry build of kvroute's gateway
// (the core module's cmd/kvroute-gateway: the same flags, routes and
// behaviour, through the same gateway/gatewaycmd.Run) with export over OTLP.
//
// Usage: the flags of cmd/kvroute-gateway, plus the OpenTelemetry SDK's
// environment:
//
//	OTEL_EXPORTER_OTLP_ENDPOINT=http://otel-collector:4317 \
//	OTEL_EXPORTER_OTLP_PROTOCOL=grpc OTEL_SERVICE_NAME=kvroute-gateway \
//	OTEL_TRACES_SAMPLER=parentbased_traceidratio OTEL_TRACES_SAMPLER_ARG=0.1 \
//	kvroute-gateway --endpoints 10.0.0.7:8000,10.0.0.8:8000 --model Qwen/Qwen3-32B
//
// With OTEL_EXPORTER_OTLP_ENDPOINT (or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT)
// set, every request is traced: the gateway's server span joins the client's
// W3C traceparent, the router's pick span (with keys, index_lookup, filter,
// score and one render span per tokenization attempt) nests under it, and
// the engine receives the trace context. The KV-event spans (events_receive,
// events_decode, events_process) are exported too when the router
// configuration enables them (events.tracing). Protocols: grpc or
// http/protobuf (the default); see the otlpenv package for every variable.
// Without an endpoint it runs like cmd/kvroute-gateway and traces nothing. On
// SIGINT or SIGTERM it shuts the gateway down, then flushes the spans still
// batched.
//
// It lives in the contrib/otel module because the OTLP exporters bring gRPC
// into the module graph, which kvroute's core module keeps out.
package main
