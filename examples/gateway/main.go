package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/kvroute/kvroute/examples/gateway/gatewaycmd"
)

// otlpBinary is the gateway that exports OTLP; this one names it when the
// environment asks for OTLP export.
const otlpBinary = "kvroute-gateway (go run github.com/kvroute/kvroute/contrib/otel/cmd/kvroute-gateway)"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := gatewaycmd.Run(ctx, os.Args[1:], os.Stdout, os.Stderr, gatewaycmd.Options{OTLPBinary: otlpBinary})
	stop()
	switch {
	case errors.Is(err, flag.ErrHelp):
	case err != nil:
		fmt.Fprintln(os.Stderr, "gateway:", err)
		os.Exit(1)
	}
}
