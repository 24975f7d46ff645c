package otlpenv_test

import (
	"fmt"

	"github.com/kvroute/kvroute/contrib/otel/otlpenv"
)

// Resolve tells what the environment asks for; NewTracerProvider builds the
// provider from the same variables.
func ExampleResolve() {
	vars := map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT": "http://otel-collector:4317",
		"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
	}
	s, err := otlpenv.Resolve(func(k string) string { return vars[k] })
	fmt.Println(s.Enabled, s.Protocol, s.Endpoint, err)
	// Output: true grpc http://otel-collector:4317 <nil>
}
