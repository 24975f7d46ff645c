package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/contrib/extproc"
	"github.com/kvroute/kvroute/contrib/otel/otlptest"
	"github.com/kvroute/kvroute/internal/leakcheck"
)

// clearOTLPEnv unsets, for the test, the OpenTelemetry variables that
// would change what kvroute-epp's --tracing does.
func clearOTLPEnv(t *testing.T) {
	for _, k := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_PROTOCOL",
		"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_TRACES_EXPORTER", "OTEL_SDK_DISABLED", "OTEL_TRACES_SAMPLER",
		"OTEL_TRACES_SAMPLER_ARG", "OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES"} {
		t.Setenv(k, "")
	}
}

// --tracing, which llm-d's router chart passes as --tracing=true or
// --tracing=false, is checked as a boolean (default true). With no OTLP
// endpoint in the environment nothing is exported, which --tracing given
// true warns of once; an exporter kvroute-epp does not have
// (OTEL_TRACES_EXPORTER=console, llm-d's development default) is refused
// at start unless --tracing=false.
func TestTracingFlag(t *testing.T) {
	for _, args := range [][]string{{"--tracing=maybe"}, {"--tracing="}} {
		_, err := parseFlags(append([]string{"--pool-name", "p"}, args...), io.Discard)
		require.ErrorContains(t, err, "tracing", args)
	}
	f, err := parseFlags([]string{"--pool-name", "p"}, io.Discard)
	require.NoError(t, err)
	require.True(t, f.tracing.on, "llm-d's default")
	require.False(t, f.tracing.given)

	clearOTLPEnv(t)
	t.Cleanup(leakcheck.Check(t))
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // run starts, then stops at once
	runWith := func(args string) (string, error) {
		var stderr bytes.Buffer
		runArgs := []string{"--endpoints", "127.0.0.1:1", "--model", model, "--config-text", "events:\n  enabled: false\n",
			"--listen-host", "127.0.0.1", "--grpc-port", "0", "--grpc-health-port", "0", "--metrics-port", "0", "--drain-timeout=0"}
		if args != "" {
			runArgs = append(runArgs, args)
		}
		err := run(ctx, runArgs, io.Discard, &stderr)
		return stderr.String(), err
	}
	for args, warned := range map[string]int{"--tracing": 1, "--tracing=true": 1, "--tracing=false": 0, "": 0} {
		logs, err := runWith(args)
		require.NoError(t, err, args)
		require.Equal(t, warned, strings.Count(logs, "no span is exported"), args+": "+logs)
	}
	t.Setenv("OTEL_TRACES_EXPORTER", "console")
	_, err = runWith("")
	require.ErrorContains(t, err, "--tracing")
	require.ErrorContains(t, err, "OTEL_TRACES_EXPORTER")
	_, err = runWith("--tracing=false")
	require.NoError(t, err, "tracing off: the environment is not read")
}

// With --tracing and the variables llm-d's router chart sets (an endpoint
// with no protocol: a collector's gRPC port), a request Envoy forwards
// with a client's traceparent is exported over OTLP/gRPC to a real
// receiver as an "extproc route" span in the client's trace, with the
// router's pick span below it, under service name kvroute-epp; the spans
// are flushed when kvroute-epp exits.
func TestTracingExportsRoutedRequestsOverOTLP(t *testing.T) {
	defer leakcheck.Check(t)()
	clearOTLPEnv(t)
	recv, err := otlptest.NewGRPC()
	require.NoError(t, err)
	defer recv.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", recv.Endpoint)
	t.Setenv("OTEL_TRACES_EXPORTER", "otlp")

	engine, stopEngine := startSimEngine(t)
	defer stopEngine()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	m, done := startEPP(t, ctx, "--endpoints", engine, "--model", model,
		"--config-text", "blockSize: 16\nevents:\n  enabled: false\n", "--tracing=true")
	envoy, client, stopEnvoy := startEnvoy(t, m[1])
	defer stopEnvoy()
	const traceID, parentID = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
	req, err := http.NewRequest(http.MethodPost, envoy+"/v1/completions",
		strings.NewReader(`{"model":"`+model+`","prompt":"hello from a traced client","max_tokens":2}`))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("traceparent", "00-"+traceID+"-"+parentID+"-01")
	resp, err := client.Do(req)
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))

	cancel()
	waitRun(t, done)
	byName := map[string]otlptest.Span{}
	for _, s := range recv.Spans() {
		byName[s.Name] = s
	}
	route, ok := byName[extproc.SpanRoute]
	require.True(t, ok, "the route span was exported: %v", recv.Spans())
	require.Equal(t, traceID, route.TraceID)
	require.Equal(t, parentID, route.ParentSpanID)
	require.Equal(t, "kvroute-epp", route.Service)
	require.Equal(t, engine, route.Attributes["kvroute.extproc.served_endpoint"])
	require.Equal(t, "routed", route.Attributes["kvroute.extproc.result"])
	pick, ok := byName["pick"]
	require.True(t, ok, "the router's pick span was exported")
	require.Equal(t, route.SpanID, pick.ParentSpanID)
}
