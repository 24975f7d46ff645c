package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
)

// llmdPD is an llm-d P/D EndpointPickerConfig, as llm-d's P/D guide writes
// it, with session affinity by session ID, LoRA affinity and flow control
// on; events off so that nothing is dialled.
const llmdPD = `apiVersion: llm-d.ai/v1alpha1
kind: EndpointPickerConfig
featureGates: [flowControl]
plugins:
- type: precise-prefix-cache-producer
  parameters:
    kvEventsConfig: {discoverPods: false}
- type: prefix-cache-affinity-filter
- type: token-load-scorer
- type: session-affinity-scorer
  parameters: {strategy: session_id}
- type: prefill-filter
- type: decode-filter
- type: disagg-profile-handler
  parameters:
    deciders: {prefill: prefix-based-pd-decider}
- type: prefix-based-pd-decider
  parameters: {nonCachedTokens: 128}
- type: lora-affinity-scorer
schedulingProfiles:
- name: prefill
  plugins: [{pluginRef: prefill-filter}, {pluginRef: prefix-cache-affinity-filter}, {pluginRef: token-load-scorer}]
- name: decode
  plugins: [{pluginRef: decode-filter}, {pluginRef: prefix-cache-affinity-filter}, {pluginRef: token-load-scorer}, {pluginRef: session-affinity-scorer},
    {pluginRef: lora-affinity-scorer, weight: 2}]
`

// An llm-d P/D configuration as --config turns kvroute's P/D profile,
// session affinity, admission stage and LoRA scorer on, as their own flags
// would, and --engine-metrics-config feeds that admission stage and the
// LoRA scorer: their metrics are registered.
func TestLLMDConfigTurnsStagesOn(t *testing.T) {
	defer leakcheck.Check(t)()
	cfgPath := filepath.Join(t.TempDir(), "epp.yaml")
	require.NoError(t, os.WriteFile(cfgPath, []byte(llmdPD), 0o600))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	emPath := filepath.Join(t.TempDir(), "engine-metrics.yaml")
	require.NoError(t, os.WriteFile(emPath, []byte("interval: 1h\nstaleness: 2h\n"), 0o600))
	// --engine-metrics-config feeds the file's admission stage.
	m, done := startEPP(t, ctx, "--endpoints", "127.0.0.1:8000", "--model", model, "--config", cfgPath, "--engine-metrics-config", emPath)

	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	resp, err := client.Get(m[3])
	require.NoError(t, err)
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, series := range []string{"kvroute_disagg_decode_without_events_total 0", "kvroute_session_entries 0", `llm_d_epp_flow_control_queue_size{priority="0"} 0`, "kvroute_engine_metrics_endpoints", `kvroute_lora_candidates_total{state="running"} 0`} {
		require.True(t, strings.Contains(string(metrics), series), "no %s: the stage is off", series)
	}

	cancel()
	waitRun(t, done)
}

// A stage the --config file configures and its own flag configures too is
// refused before the picker starts, naming both.
func TestLLMDConfigStageGivenTwiceIsRefused(t *testing.T) {
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "epp.yaml")
	require.NoError(t, os.WriteFile(cfgPath, []byte(llmdPD), 0o600))
	stage := filepath.Join(dir, "stage.yaml")
	require.NoError(t, os.WriteFile(stage, []byte("{}\n"), 0o600))
	for _, flag := range []string{"--disagg-config", "--session-config", "--admission-config", "--lora-config"} {
		f, err := parseFlags([]string{"--endpoints", "127.0.0.1:8000", "--config", cfgPath, flag, stage}, io.Discard)
		require.NoError(t, err)
		_, _, err = loadConfigStages(f, slog.New(slog.DiscardHandler))
		require.ErrorContains(t, err, "--config "+cfgPath+" configures", flag)
		require.ErrorContains(t, err, flag+" "+stage, flag)
	}

	// Without its flag, each stage is the file's.
	f, err := parseFlags([]string{"--endpoints", "127.0.0.1:8000", "--config", cfgPath}, io.Discard)
	require.NoError(t, err)
	_, st, err := loadConfigStages(f, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	require.Equal(t, int64(128), st.disagg.NonCachedTokens)
	require.Equal(t, []string{"x-session-id"}, st.session.Headers)
	require.Equal(t, time.Minute, st.admission.QueueTimeout)
	require.Equal(t, 2.0, st.lora.Weight)
}
