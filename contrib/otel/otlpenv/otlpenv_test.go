package otlpenv

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/kvroute/kvroute/contrib/otel/otlptest"
	"github.com/kvroute/kvroute/internal/leakcheck"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestResolveFollowsTheSDKVariables(t *testing.T) {
	for name, c := range map[string]struct {
		env  map[string]string
		want Settings
		err  string
	}{
		"nothing set":      {env: nil, want: Settings{}},
		"endpoint":         {env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, want: Settings{Enabled: true, Protocol: ProtocolHTTPProtobuf, Endpoint: "http://c:4318"}},
		"traces endpoint":  {env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://t:4318/v1/traces"}, want: Settings{Enabled: true, Protocol: ProtocolHTTPProtobuf, Endpoint: "http://t:4318/v1/traces"}},
		"grpc":             {env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, want: Settings{Enabled: true, Protocol: ProtocolGRPC, Endpoint: "http://c:4317"}},
		"traces protocol":  {env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc"}, want: Settings{Enabled: true, Protocol: ProtocolGRPC, Endpoint: "http://c:4317"}},
		"sdk disabled":     {env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_SDK_DISABLED": "true"}, want: Settings{}},
		"exporter none":    {env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_TRACES_EXPORTER": "none"}, want: Settings{}},
		"exporter otlp":    {env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_TRACES_EXPORTER": "otlp"}, want: Settings{Enabled: true, Protocol: ProtocolHTTPProtobuf, Endpoint: "http://c:4318"}},
		"exporter console": {env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_TRACES_EXPORTER": "console"}, err: "OTEL_TRACES_EXPORTER"},
		"http/json":        {env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, err: "http/json"},
		// Enum values are read case-insensitively, as the specification's
		// environment variables say they should be.
		"exporter NONE":  {env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_TRACES_EXPORTER": "None"}, want: Settings{}},
		"exporter OTLP":  {env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_TRACES_EXPORTER": "OTLP"}, want: Settings{Enabled: true, Protocol: ProtocolHTTPProtobuf, Endpoint: "http://c:4318"}},
		"protocol GRPC":  {env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "GRPC"}, want: Settings{Enabled: true, Protocol: ProtocolGRPC, Endpoint: "http://c:4317"}},
		"protocol HTTP/": {env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "HTTP/Protobuf"}, want: Settings{Enabled: true, Protocol: ProtocolHTTPProtobuf, Endpoint: "http://c:4318"}},
		// The SDK would log these and sample every trace instead.
		"sampler typo":        {env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_TRACES_SAMPLER": "traceidratio_parentbased"}, err: "OTEL_TRACES_SAMPLER="},
		"sampler arg percent": {env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "10%"}, err: "OTEL_TRACES_SAMPLER_ARG"},
		"sampler arg above 1": {env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "10"}, err: "OTEL_TRACES_SAMPLER_ARG"},
		"sampler arg NaN":     {env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "NaN"}, err: "OTEL_TRACES_SAMPLER_ARG"},
		"sampler ratio":       {env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_TRACES_SAMPLER": " ParentBased_TraceIDRatio ", "OTEL_TRACES_SAMPLER_ARG": "0.1"}, want: Settings{Enabled: true, Protocol: ProtocolHTTPProtobuf, Endpoint: "http://c:4318"}},
		"sampler arg unused":  {env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_TRACES_SAMPLER": "always_on", "OTEL_TRACES_SAMPLER_ARG": "x"}, want: Settings{Enabled: true, Protocol: ProtocolHTTPProtobuf, Endpoint: "http://c:4318"}},
		"sampler export off":  {env: map[string]string{"OTEL_TRACES_SAMPLER": "bogus"}, want: Settings{}},
	} {
		got, err := Resolve(env(c.env))
		if c.err != "" {
			require.ErrorContains(t, err, c.err, name)
			continue
		}
		require.NoError(t, err, name)
		require.Equal(t, c.want, got, name)
	}
}

func TestNoProviderWithoutAnEndpoint(t *testing.T) {
	tp, s, err := NewTracerProvider(context.Background(), Config{}, Options{Getenv: env(nil)})
	require.NoError(t, err)
	require.Nil(t, tp)
	require.False(t, s.Enabled)
}

// The SDK's sampler variables apply: with traceidratio 0 nothing is sampled,
// so nothing reaches the processors or the receiver.
func TestSamplerFromTheEnvironment(t *testing.T) {
	defer leakcheck.Check(t)()
	recv := otlptest.NewHTTP()
	defer recv.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", recv.Endpoint)
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "")
	for ratio, want := range map[string]int{"0": 0, "1": 5} {
		t.Setenv("OTEL_TRACES_SAMPLER", "traceidratio")
		t.Setenv("OTEL_TRACES_SAMPLER_ARG", ratio)
		mem := tracetest.NewSpanRecorder()
		tp, s, err := NewTracerProvider(context.Background(), Config{ServiceName: "svc"}, Options{SpanProcessors: []sdktrace.SpanProcessor{mem}})
		require.NoError(t, err)
		require.Equal(t, ProtocolHTTPProtobuf, s.Protocol)
		for range 5 {
			_, sp := tp.Tracer("t").Start(context.Background(), "work")
			sp.End()
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		require.NoError(t, tp.Shutdown(ctx))
		cancel()
		require.Len(t, mem.Ended(), want, "ratio %s", ratio)
	}
	require.Len(t, recv.Spans(), 5, "only the sampled spans were exported")
	for _, s := range recv.Spans() {
		require.Equal(t, "svc", s.Service)
	}
}

// Config.Protocol is the protocol when the environment names none, and
// Config.SampleRatio the sampler when OTEL_TRACES_SAMPLER is unset: a gRPC
// receiver gets the spans with only the endpoint set, and a ratio of 0.5
// keeps some of 200 root spans and drops some (the SDK's own default would
// keep all). With OTEL_TRACES_SAMPLER set the environment's sampler wins.
func TestConfigProtocolAndSampleRatio(t *testing.T) {
	defer leakcheck.Check(t)()
	recv, err := otlptest.NewGRPC()
	require.NoError(t, err)
	defer recv.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", recv.Endpoint)
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "")
	t.Setenv("OTEL_TRACES_SAMPLER", "")
	t.Setenv("OTEL_TRACES_SAMPLER_ARG", "")
	run := func(cfg Config) int {
		mem := tracetest.NewSpanRecorder()
		tp, s, err := NewTracerProvider(context.Background(), cfg, Options{SpanProcessors: []sdktrace.SpanProcessor{mem}})
		require.NoError(t, err)
		require.Equal(t, ProtocolGRPC, s.Protocol)
		for range 200 {
			_, sp := tp.Tracer("t").Start(context.Background(), "work")
			sp.End()
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		require.NoError(t, tp.Shutdown(ctx))
		return len(mem.Ended())
	}
	sampled := run(Config{Protocol: ProtocolGRPC, SampleRatio: 0.5})
	require.Greater(t, sampled, 0)
	require.Less(t, sampled, 200)
	require.Len(t, recv.Spans(), sampled, "exported over gRPC")

	t.Setenv("OTEL_TRACES_SAMPLER", "always_on")
	require.Equal(t, 200, run(Config{Protocol: ProtocolGRPC, SampleRatio: 0.5}), "the environment's sampler wins")

	for _, bad := range []Config{{Protocol: "http/json"}, {SampleRatio: 1.5}, {SampleRatio: -0.1}} {
		_, _, err := NewTracerProvider(context.Background(), bad, Options{})
		require.Error(t, err, "%+v", bad)
	}
}
