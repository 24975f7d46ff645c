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
