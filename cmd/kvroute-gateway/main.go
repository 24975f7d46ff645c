package main

import (
	"context"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/kvroute/kvroute/gateway/gatewaycmd"
	"github.com/kvroute/kvroute/internal/cliflag"
)

// otlpBinary is the build of this gateway that exports OTLP; this one names
// it when the environment asks for OTLP export.
const otlpBinary = "the OpenTelemetry build of kvroute-gateway (go run github.com/kvroute/kvroute/contrib/otel/cmd/kvroute-gateway)"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	cliflag.Exit(gatewaycmd.Name, err)
}

// run serves the gateway of the command line args until ctx ends.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return gatewaycmd.Run(ctx, args, stdout, stderr, gatewaycmd.Options{OTLPBinary: otlpBinary})
}
