// Package otlpenv builds an OpenTelemetry TracerProvider that exports spans
// over OTLP, configured the way every OpenTelemetry SDK is: by the
// environment.
//
// Export is on when OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set (and neither OTEL_SDK_DISABLED=true
// nor OTEL_TRACES_EXPORTER=none says otherwise). OTEL_EXPORTER_OTLP_PROTOCOL
// (or its _TRACES_ form) picks "grpc" or "http/protobuf", the default being
// http/protobuf as the OpenTelemetry specification sets it. The exporters
// themselves read the rest of the OTEL_EXPORTER_OTLP_* variables (headers,
// timeout, compression, certificates, insecure), the SDK reads
// OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG (default: parent-based,
// always on; an unknown sampler, or a ratio that is not a number from 0 to
// 1, is refused here, where the SDK would only log it and sample every
// trace) and OTEL_BSP_* for the batch processor, and the resource takes
// OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES.
//
// Dependencies: the official OTLP trace exporters
// (go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc and
// otlptracehttp) and the SDK. The gRPC exporter brings google.golang.org/grpc
// into the module graph, which is why this package lives in its own module
// (contrib/otel) and not in kvroute's core module, whose packages only take a
// trace.TracerProvider through the OpenTelemetry API. The exporters are used
// directly rather than through go.opentelemetry.io/contrib/exporters/autoexport,
// which would also bring the metric and log exporters and a Prometheus
// bridge for one choice between two trace exporters.
package otlpenv
