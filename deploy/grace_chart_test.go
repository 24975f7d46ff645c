package deploy

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"
)

// chartStopDefaults returns the defaults of kvroute-epp's stop timeouts
// as the chart's Deployment template states them (its $stop dict, which
// kvroute-epp's own tests hold to the binary's defaults), by flag name.
func chartStopDefaults(t *testing.T) map[string]time.Duration {
	t.Helper()
	b, err := os.ReadFile(chartDir + "/templates/deployment.yaml")
	require.NoError(t, err)
	line := regexp.MustCompile(`\$stop := dict (.*) -}}`).FindSubmatch(b)
	require.NotNil(t, line, "the template's $stop dict")
	defaults := map[string]time.Duration{}
	for _, m := range regexp.MustCompile(`"([a-z-]+)" "([^"]+)"`).FindAllSubmatch(line[1], -1) {
		d, err := time.ParseDuration(string(m[2]))
		require.NoError(t, err)
		defaults[string(m[1])] = d
	}
	require.Len(t, defaults, 4, "drain-timeout, shutdown-timeout, metrics-shutdown-timeout, tracing-flush-timeout")
	return defaults
}

// deploymentGrace is a Deployment's terminationGracePeriodSeconds.
func deploymentGrace(t *testing.T, doc []byte) time.Duration {
	t.Helper()
	var d appsv1.Deployment
	require.NoError(t, yaml.UnmarshalStrict(doc, &d))
	require.NotNil(t, d.Spec.Template.Spec.TerminationGracePeriodSeconds, d.Name)
	return time.Duration(*d.Spec.Template.Spec.TerminationGracePeriodSeconds) * time.Second
}

// After SIGTERM kvroute-epp keeps serving ext_proc for --drain-timeout
// (30s, llm-d's default), then lets its streams finish for
// --shutdown-timeout (10s) and the metrics port's requests for
// --metrics-shutdown-timeout (5s), exports the spans left for
// --tracing-flush-timeout (10s) and writes the index checkpoint: the
// plain manifests' and the chart's default grace period (60s) cover all
// of it, where Kubernetes' default (30s) would kill the picker mid-drain.
func TestManifestsGraceCoversTheDrainWindow(t *testing.T) {
	var stop time.Duration
	for _, d := range chartStopDefaults(t) {
		stop += d
	}
	require.Greater(t, stop, 30*time.Second)
	b, err := os.ReadFile("kvroute-epp/deployment.yaml")
	require.NoError(t, err)
	for _, doc := range splitDocs(t, "deployment.yaml", b) {
		if strings.Contains(string(doc), "kind: Deployment") {
			require.GreaterOrEqual(t, deploymentGrace(t, doc), stop)
		}
	}
	traced := strings.Replace(minimalValues, "inferenceExtension:\n", "inferenceExtension:\n  tracing: {enabled: true}\n", 1)
	grace := deploymentGrace(t, chartObjects(t, loadSchemas(t), traced)["Deployment"][0])
	require.Equal(t, 60*time.Second, grace, "the chart's default")
	require.GreaterOrEqual(t, grace, stop)
}

// The chart's grace period is inferenceExtension.terminationGracePeriodSeconds,
// and a render whose flags make kvroute-epp's stop longer than it fails,
// naming the value and each part: the flags' durations (a zero stop
// timeout is its default, a zero drain window none), rounded up to the
// second, with tracing-flush-timeout only when tracing is on.
func TestChartGraceCoversTheStopTimeouts(t *testing.T) {
	s := loadSchemas(t)
	with := func(values string) string {
		return strings.Replace(minimalValues, "inferenceExtension:\n", "inferenceExtension:\n"+values, 1)
	}
	for values, grace := range map[string]time.Duration{
		"  terminationGracePeriodSeconds: 90\n":                                                                                      90 * time.Second,
		"  terminationGracePeriodSeconds: 45\n":                                                                                      45 * time.Second, // 30s + 10s + 5s, no tracing
		"  terminationGracePeriodSeconds: 55\n  tracing: {enabled: true}\n":                                                          55 * time.Second,
		"  terminationGracePeriodSeconds: 15\n  flags: {drain-timeout: \"0\"}\n":                                                     15 * time.Second,
		"  terminationGracePeriodSeconds: 45\n  flags: {shutdown-timeout: \"0s\", metrics-shutdown-timeout: \"0\"}\n":                45 * time.Second,
		"  terminationGracePeriodSeconds: 120\n  flags: {drain-timeout: 1m, shutdown-timeout: 30s, metrics-shutdown-timeout: 10s}\n": 120 * time.Second,
	} {
		require.Equal(t, grace, deploymentGrace(t, chartObjects(t, s, with(values))["Deployment"][0]), values)
	}
	for values, want := range map[string]string{
		"  flags: {drain-timeout: 45500ms}\n":                                "inferenceExtension.terminationGracePeriodSeconds 60 is shorter than kvroute-epp's stop after SIGTERM, 61s (drain-timeout 45500ms + metrics-shutdown-timeout 5s + shutdown-timeout 10s)",
		"  terminationGracePeriodSeconds: 54\n  tracing: {enabled: true}\n":  "54 is shorter than kvroute-epp's stop after SIGTERM, 55s (drain-timeout 30s + metrics-shutdown-timeout 5s + shutdown-timeout 10s + tracing-flush-timeout 10s)",
		"  flags: {shutdown-timeout: 1m}\n":                                  "shutdown-timeout 1m",
		"  tracing: {enabled: true}\n  flags: {tracing-flush-timeout: 1m}\n": "tracing-flush-timeout 1m",
		"  flags: {metrics-shutdown-timeout: \"10\"}\n":                      "inferenceExtension.flags.metrics-shutdown-timeout: \"10\" is not a duration of zero or more such as 5s",
		"  flags: {drain-timeout: -1s}\n":                                    "inferenceExtension.flags.drain-timeout: \"-1s\" is not a duration",
	} {
		_, err := renderChart(t, with(values))
		require.ErrorContains(t, err, want, values)
	}
	require.ErrorContains(t, chartValuesError(t, with("  terminationGracePeriodSeconds: 0\n")), "terminationGracePeriodSeconds")
	require.ErrorContains(t, chartValuesError(t, with("  terminationGracePeriodSeconds: \"60\"\n")), "terminationGracePeriodSeconds")
}

// Every duration kvroute-epp's flags accept (Go's time.ParseDuration: a
// sign, fractions, any run of units, µs spelt with the micro sign or the
// Greek mu) renders, and is summed as kvroute-epp reads it: the grace
// period the render asks for is the flags' stop, rounded up to the second.
func TestChartGraceReadsDurationsAsKvrouteEpp(t *testing.T) {
	stopDefaults := chartStopDefaults(t)
	for _, v := range []string{"1h30m", "1.5s", "500ms", "0", "90s", "2m0s", "1µs", "1μs", "1us", "1000000ns",
		"+1s", "+0", "-0", "-0s", "1.s", ".5s", "1h1m1s1ms1us1ns", "0.000000001s"} {
		d, err := time.ParseDuration(v)
		require.NoError(t, err, v)
		stop := d + stopDefaults["shutdown-timeout"] + stopDefaults["metrics-shutdown-timeout"]
		grace := int64((stop + time.Second - 1) / time.Second)
		flags := "  flags: {drain-timeout: \"" + v + "\"}\n"
		values := strings.Replace(minimalValues, "inferenceExtension:\n", "inferenceExtension:\n"+flags, 1)
		at := func(grace int64) string {
			return strings.Replace(values, "inferenceExtension:\n", "inferenceExtension:\n  terminationGracePeriodSeconds: "+strconv.FormatInt(grace, 10)+"\n", 1)
		}
		_, err = renderChart(t, at(grace))
		require.NoError(t, err, "drain-timeout %q (%v): a grace period of %ds covers it", v, d, grace)
		_, err = renderChart(t, at(grace-1))
		require.ErrorContains(t, err, "is shorter than kvroute-epp's stop after SIGTERM", "drain-timeout %q (%v): %ds does not", v, d, grace-1)
	}
}
