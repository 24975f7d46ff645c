package deploy

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The chart's tracing block is llm-d's router chart's: off by default
// (--tracing=false, no OTEL_* variable), and when enabled --tracing=true
// with the collector's endpoint, the otlp exporter, the service name, the
// pod's namespace, node and name as resource attributes (each variable
// they refer to defined before them) and the sampler. A sampler the SDK
// does not know, or a ratio that is none, fails the chart's schema.
func TestChartTracing(t *testing.T) {
	s := loadSchemas(t)
	off := chartObjects(t, s, minimalValues)["Deployment"][0]
	require.Contains(t, eppArgs(t, off), "--tracing=false")
	for _, e := range eppContainer(t, off).Env {
		require.False(t, strings.HasPrefix(e.Name, "OTEL_"), e.Name)
	}

	on := chartObjects(t, s, strings.Replace(minimalValues, "inferenceExtension:\n",
		"inferenceExtension:\n  tracing:\n    enabled: true\n    otelExporterEndpoint: http://otel-collector.monitoring:4317\n    sampling: {samplerArg: \"0.25\"}\n", 1))["Deployment"][0]
	require.Contains(t, eppArgs(t, on), "--tracing=true")
	env := map[string]string{}
	defined := map[string]bool{}
	for _, e := range eppContainer(t, on).Env {
		for _, ref := range []string{"POD_NAMESPACE", "NODE_NAME", "POD_NAME"} {
			if strings.Contains(e.Value, "$("+ref+")") {
				require.True(t, defined[ref], "%s refers to %s, defined after it", e.Name, ref)
			}
		}
		defined[e.Name] = true
		env[e.Name] = e.Value
	}
	require.Equal(t, "http://otel-collector.monitoring:4317", env["OTEL_EXPORTER_OTLP_ENDPOINT"])
	require.Equal(t, "otlp", env["OTEL_TRACES_EXPORTER"])
	require.Equal(t, "kvroute-epp", env["OTEL_SERVICE_NAME"])
	require.Equal(t, "parentbased_traceidratio", env["OTEL_TRACES_SAMPLER"])
	require.Equal(t, "0.25", env["OTEL_TRACES_SAMPLER_ARG"])
	require.Equal(t, "k8s.namespace.name=$(POD_NAMESPACE),k8s.node.name=$(NODE_NAME),k8s.pod.name=$(POD_NAME)", env["OTEL_RESOURCE_ATTRIBUTES"])

	for _, bad := range []string{"    sampling: {sampler: ratio}\n", "    sampling: {samplerArg: \"10%\"}\n", "    sampling: {samplerArg: \"1.5\"}\n"} {
		err := chartValuesError(t, strings.Replace(minimalValues, "inferenceExtension:\n", "inferenceExtension:\n  tracing:\n    enabled: true\n"+bad, 1))
		require.ErrorContains(t, err, "/inferenceExtension/tracing/sampling/", bad)
	}
}
