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

// chartCheckpointMargin is the time the chart's Deployment template leaves
// for writing the index checkpoint after kvroute-epp's stop timeouts (its
// $checkpoint), which the grace period must cover too.
func chartCheckpointMargin(t *testing.T) time.Duration {
	t.Helper()
	b, err := os.ReadFile(chartDir + "/templates/deployment.yaml")
	require.NoError(t, err)
	m := regexp.MustCompile(`\$checkpoint := "([^"]+)" -}}`).FindSubmatch(b)
	require.NotNil(t, m, "the template's $checkpoint")
	d, err := time.ParseDuration(string(m[1]))
	require.NoError(t, err)
	require.Equal(t, 5*time.Second, d, "the margin values.yaml, the chart's README and kvroute's README state")
	return d
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
// --tracing-flush-timeout (10s) and writes the index checkpoint, for which
// the chart leaves 5s: the plain manifest's grace period covers all of it
// with the timeouts its args give (the defaults where they give none), and
// so does the chart's default (60s), where Kubernetes' default (30s) would
// kill the picker mid-drain.
func TestManifestsGraceCoversTheDrainWindow(t *testing.T) {
	margin := chartCheckpointMargin(t)
	b, err := os.ReadFile("kvroute-epp/deployment.yaml")
	require.NoError(t, err)
	var deployments int
	for _, doc := range splitDocs(t, "deployment.yaml", b) {
		if !strings.Contains(string(doc), "kind: Deployment") {
			continue
		}
		deployments++
		var d appsv1.Deployment
		require.NoError(t, yaml.UnmarshalStrict(doc, &d))
		timeouts := chartStopDefaults(t)
		for _, c := range d.Spec.Template.Spec.Containers {
			for _, a := range c.Args {
				name, v, ok := strings.Cut(strings.TrimPrefix(a, "--"), "=")
				if _, stop := timeouts[name]; ok && stop {
					d, err := time.ParseDuration(v)
					require.NoError(t, err, a)
					if d > 0 || name == "drain-timeout" { // a zero stop timeout is its default
						timeouts[name] = d
					}
				}
			}
		}
		stop := margin
		for _, d := range timeouts {
			stop += d
		}
		require.Greater(t, stop, 30*time.Second)
		require.GreaterOrEqual(t, deploymentGrace(t, doc), stop, "%s: the stop timeouts %v and %v for the checkpoint", d.Name, timeouts, margin)
	}
	require.Equal(t, 1, deployments)

	var stop time.Duration
	for _, d := range chartStopDefaults(t) {
		stop += d
	}
	traced := strings.Replace(minimalValues, "inferenceExtension:\n", "inferenceExtension:\n  tracing: {enabled: true}\n", 1)
	grace := deploymentGrace(t, chartObjects(t, loadSchemas(t), traced)["Deployment"][0])
	require.Equal(t, 60*time.Second, grace, "the chart's default")
	require.GreaterOrEqual(t, grace, stop+margin)
}

// The chart's grace period is inferenceExtension.terminationGracePeriodSeconds,
// and a render whose flags make kvroute-epp's stop, with 5s over for the
// index checkpoint, longer than it fails, naming the value and each part:
// the flags' durations (a zero stop timeout is its default, a zero drain
// window none) and the checkpoint's margin, rounded up to the second, with
// tracing-flush-timeout only when tracing is on.
func TestChartGraceCoversTheStopTimeouts(t *testing.T) {
	s := loadSchemas(t)
	with := func(values string) string {
		return strings.Replace(minimalValues, "inferenceExtension:\n", "inferenceExtension:\n"+values, 1)
	}
	for values, grace := range map[string]time.Duration{
		"  terminationGracePeriodSeconds: 90\n":                                                                                      90 * time.Second,
		"  terminationGracePeriodSeconds: 50\n":                                                                                      50 * time.Second, // 30s + 10s + 5s, no tracing, + 5s
		"  terminationGracePeriodSeconds: 60\n  tracing: {enabled: true}\n":                                                          60 * time.Second,
		"  terminationGracePeriodSeconds: 20\n  flags: {drain-timeout: \"0\"}\n":                                                     20 * time.Second,
		"  terminationGracePeriodSeconds: 50\n  flags: {shutdown-timeout: \"0s\", metrics-shutdown-timeout: \"0\"}\n":                50 * time.Second,
		"  terminationGracePeriodSeconds: 105\n  flags: {drain-timeout: 1m, shutdown-timeout: 30s, metrics-shutdown-timeout: 10s}\n": 105 * time.Second,
	} {
		require.Equal(t, grace, deploymentGrace(t, chartObjects(t, s, with(values))["Deployment"][0]), values)
	}
	for values, want := range map[string]string{
		"  flags: {drain-timeout: 40500ms}\n":                                  "inferenceExtension.terminationGracePeriodSeconds 60 is shorter than kvroute-epp's stop after SIGTERM with the index checkpoint's write, 61s (drain-timeout 40500ms + metrics-shutdown-timeout 5s + shutdown-timeout 10s + checkpoint 5s)",
		"  terminationGracePeriodSeconds: 59\n  tracing: {enabled: true}\n":    "59 is shorter than kvroute-epp's stop after SIGTERM with the index checkpoint's write, 60s (drain-timeout 30s + metrics-shutdown-timeout 5s + shutdown-timeout 10s + tracing-flush-timeout 10s + checkpoint 5s)",
		"  terminationGracePeriodSeconds: 49\n":                                "49 is shorter than kvroute-epp's stop after SIGTERM with the index checkpoint's write, 50s",
		"  terminationGracePeriodSeconds: 45\n  flags: {drain-timeout: 30s}\n": "leave 5s over the stop timeouts for the index checkpoint",
		"  flags: {shutdown-timeout: 1m}\n":                                    "shutdown-timeout 1m",
		"  tracing: {enabled: true}\n  flags: {tracing-flush-timeout: 1m}\n":   "tracing-flush-timeout 1m",
		"  flags: {metrics-shutdown-timeout: \"10\"}\n":                        "inferenceExtension.flags.metrics-shutdown-timeout: \"10\" is not a duration of zero or more such as 5s",
		"  flags: {drain-timeout: -1s}\n":                                      "inferenceExtension.flags.drain-timeout: \"-1s\" is not a duration",
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
// period the render asks for is the flags' stop and the checkpoint's
// margin, rounded up to the second.
func TestChartGraceReadsDurationsAsKvrouteEpp(t *testing.T) {
	stopDefaults, margin := chartStopDefaults(t), chartCheckpointMargin(t)
	for _, v := range []string{"1h30m", "1.5s", "500ms", "0", "90s", "2m0s", "1µs", "1μs", "1us", "1000000ns",
		"+1s", "+0", "-0", "-0s", "1.s", ".5s", "1h1m1s1ms1us1ns", "0.000000001s"} {
		d, err := time.ParseDuration(v)
		require.NoError(t, err, v)
		stop := d + stopDefaults["shutdown-timeout"] + stopDefaults["metrics-shutdown-timeout"] + margin
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
