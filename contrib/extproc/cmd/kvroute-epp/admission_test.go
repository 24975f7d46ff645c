package main

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/contrib/extproc"
	"github.com/kvroute/kvroute/internal/leakcheck"
)

func TestAdmissionFlagsAreCheckedBeforeStarting(t *testing.T) {
	defer leakcheck.Check(t)()
	dir := t.TempDir()
	// Without an admission stage (--admission-config, or the --config
	// file's), engine metrics feed nothing.
	err := tryRun("--engine-metrics-config", "em.yaml")
	require.ErrorContains(t, err, "set --admission-config or --lora-config too")

	err = tryRun("--admission-config", writeConfig(t, dir, "admission.yaml", "queueTimout: 2s\n"))
	require.ErrorContains(t, err, "queueTimout")

	err = tryRun("--admission-config", writeConfig(t, dir, "good.yaml", "queueTimeout: 2s\n"),
		"--engine-metrics-config", writeConfig(t, dir, "em.yaml", "intervl: 1s\n"))
	require.ErrorContains(t, err, "intervl")
}

// The binary with --admission-config and --engine-metrics-config: requests
// go through the admission stage (a malformed queue timeout is answered 400
// by the picker, a well-formed request is admitted and routed) and the
// engine's /metrics is scraped.
func TestRunWithAdmission(t *testing.T) {
	t.Cleanup(leakcheck.Check(t)) // after the picker and the engine, which Cleanup stops first
	eps := startEngines(t, 1)
	dir := t.TempDir()
	e := startBehindEnvoy(t, "--endpoints", eps[0], "--config", writeConfig(t, dir, "config.yaml", noRenderConfig),
		"--admission-config", writeConfig(t, dir, "admission.yaml", "objectives:\n- {name: batch, priority: -1}\nqueueTimeout: 5s\n"),
		"--engine-metrics-config", writeConfig(t, dir, "engine-metrics.yaml", "interval: 50ms\n"))
	post := func(h map[string]string) (int, string) {
		resp, body := postCompletion(t, e.client, e.envoy, `{"model":"`+model+`","prompt":"hello from envoy","max_tokens":2}`, h)
		return resp.StatusCode, body
	}
	code, body := post(map[string]string{extproc.HeaderQueueTimeout: "later"})
	require.Equal(t, http.StatusBadRequest, code, body)
	require.Contains(t, body, http.CanonicalHeaderKey(extproc.HeaderQueueTimeout)) // named as package admission names it
	code, body = post(map[string]string{extproc.HeaderObjective: "batch", extproc.HeaderFairnessID: "tenant-a"})
	require.Equal(t, http.StatusOK, code, body)

	require.Contains(t, e.metrics(), `kvroute_admission_requests_total{outcome="admitted",priority="-1"} 1`)
	require.Eventually(t, func() bool { return strings.Contains(e.metrics(), "kvroute_engine_metrics_scrapes_total") },
		20*time.Second, 10*time.Millisecond)

	e.stop()
}
