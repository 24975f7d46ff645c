package main

import (
	"context"
	"fmt"
	"io"
	"os"
)

// setenv sets k to v and returns a func that restores k's previous value.
func setenv(k, v string) (restore func()) {
	old, had := os.LookupEnv(k)
	_ = os.Setenv(k, v)
	return func() {
		if had {
			_ = os.Setenv(k, old)
		} else {
			_ = os.Unsetenv(k)
		}
	}
}

// The OTLP exporter is configured by the OpenTelemetry SDK's environment,
// before the gateway starts: a protocol the exporters do not speak is
// refused before anything listens.
func Example() {
	defer setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")()
	defer setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")()
	err := run(context.Background(), []string{"--listen", "127.0.0.1:0", "--endpoints", "127.0.0.1:9"}, io.Discard, io.Discard)
	fmt.Println(err)
	// Output: otlpenv: OTLP protocol "http/json" is not supported: use "grpc" or "http/protobuf"
}
