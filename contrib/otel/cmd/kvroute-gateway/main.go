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

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/kvroute/kvroute/contrib/otel/otlpenv"
	"github.com/kvroute/kvroute/gateway/gatewaycmd"
	"github.com/kvroute/kvroute/internal/cliflag"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	cliflag.Exit(gatewaycmd.Name, err) // the same binary as cmd/kvroute-gateway, with OTLP export
}

// flushTimeout bounds the final export of batched spans at shutdown.
const flushTimeout = 10 * time.Second

// run builds the tracer provider from the environment, runs the gateway
// with it until ctx ends, then flushes and shuts the provider down.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	tp, s, err := otlpenv.NewTracerProvider(ctx, otlpenv.Config{ServiceName: "kvroute-gateway"}, otlpenv.Options{})
	if err != nil {
		return err
	}
	if tp == nil {
		return gatewaycmd.Run(ctx, args, stdout, stderr, gatewaycmd.Options{})
	}
	fmt.Fprintf(stdout, "kvroute-gateway: exporting traces over OTLP (%s) to %s\n", s.Protocol, s.Endpoint)
	err = gatewaycmd.Run(ctx, args, stdout, stderr, gatewaycmd.Options{TracerProvider: tp})
	sctx, cancel := context.WithTimeout(context.Background(), flushTimeout)
	defer cancel()
	if serr := tp.Shutdown(sctx); serr != nil {
		err = errors.Join(err, fmt.Errorf("flushing traces: %w", serr))
	}
	return err
}
