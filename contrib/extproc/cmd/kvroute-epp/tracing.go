package main

import (
	"context"
	"fmt"
	"log/slog"

	"go.opentelemetry.io/otel/trace"

	"github.com/kvroute/kvroute/contrib/otel/otlpenv"
)

// Tracing, as llm-d's router picker's --tracing gives it: on by default,
// exported over OTLP to the collector the standard OpenTelemetry variables
// name. llm-d's router chart, with tracing enabled, sets
// OTEL_EXPORTER_OTLP_ENDPOINT (a collector's gRPC port, 4317),
// OTEL_TRACES_EXPORTER=otlp, OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES
// and the sampler variables, and passes --tracing=true; kvroute-epp then
// exports the same way: over gRPC unless OTEL_EXPORTER_OTLP_PROTOCOL says
// otherwise, sampling a tenth of new traces unless OTEL_TRACES_SAMPLER
// says otherwise (llm-d's defaults). Where llm-d's picker, given no
// OTEL_TRACES_EXPORTER, prints spans to standard output, kvroute-epp
// exports nothing without an endpoint (and says so once when --tracing was
// given); OTEL_TRACES_EXPORTER=console is refused with an error rather
// than ignored.

// tracingDefaults is what the exporter does where the environment is
// silent: llm-d's router picker's protocol and sampling ratio.
var tracingDefaults = otlpenv.Config{ServiceName: "kvroute-epp", Protocol: otlpenv.ProtocolGRPC, SampleRatio: 0.1}

// startTracing returns the tracer provider --tracing and the environment
// ask for (nil when nothing is exported) and the function that flushes and
// shuts it down at exit, within --tracing-flush-timeout.
func startTracing(ctx context.Context, f flags, log *slog.Logger) (trace.TracerProvider, func(), error) {
	if !f.tracing.on {
		return nil, func() {}, nil
	}
	tp, s, err := otlpenv.NewTracerProvider(ctx, tracingDefaults, otlpenv.Options{})
	if err != nil {
		return nil, nil, fmt.Errorf("--tracing: %w (--tracing=false turns tracing off)", err)
	}
	if tp == nil {
		if f.tracing.given {
			log.Warn("--tracing: no span is exported: neither OTEL_EXPORTER_OTLP_ENDPOINT nor OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set (or OTEL_TRACES_EXPORTER=none, OTEL_SDK_DISABLED=true)")
		}
		return nil, func() {}, nil
	}
	log.Info("exporting traces over OTLP", "protocol", s.Protocol, "endpoint", s.Endpoint)
	flush := f.stop.withDefaults().tracing
	return tp, func() {
		sctx, cancel := context.WithTimeout(context.Background(), flush)
		defer cancel()
		if err := tp.Shutdown(sctx); err != nil {
			log.Warn("flushing traces at exit failed", "err", err)
		}
	}, nil
}
