package llmd_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/llmd"
)

// llm-d's podDiscoveryConfig.snapshotSocketPort turns engine snapshots on
// at that port; without it they stay off (experimental upstream), and the
// translated config reads back in kvroute's own keys (events.snapshot).
func TestTranslateSnapshotSocketPort(t *testing.T) {
	cfg, err := llmd.Translate(strings.NewReader(`{"precise-prefix-cache-producer": {"kvEventsConfig":
		{"podDiscoveryConfig": {"socketPort": 5557, "replaySocketPort": 5558, "snapshotSocketPort": 5561}}}}`))
	require.NoError(t, err)
	require.True(t, cfg.Events.Snapshot.Enabled)
	require.Equal(t, 5561, cfg.Events.Snapshot.Port)
	data, err := json.Marshal(cfg)
	require.NoError(t, err)
	require.Contains(t, string(data), `"snapshot":{"enabled":true,"port":5561`)
	back, err := kvroute.LoadConfig(bytes.NewReader(data))
	require.NoError(t, err)
	require.Equal(t, cfg, back)

	cfg, err = llmd.Translate(strings.NewReader(`{"precise-prefix-cache-producer": {"kvEventsConfig":
		{"podDiscoveryConfig": {"socketPort": 5557, "replaySocketPort": 5558}}}}`))
	require.NoError(t, err)
	require.False(t, cfg.Events.Snapshot.Enabled, "off by default")
}

// The guide's kvEventsConfig.tracing turns the KV-event spans on, as
// events.tracing.enabled does (kvroute samples them per endpoint); the
// pod discovery keys llm-d accepts and ignores, or kvroute lacks, are
// findings rather than unknown keys.
func TestTranslateKVEventsTracing(t *testing.T) {
	cfg, err := llmd.Translate(strings.NewReader(`{"precise-prefix-cache-producer": {"kvEventsConfig": {"tracing": true}}}`))
	require.NoError(t, err)
	require.True(t, cfg.Events.Tracing.Enabled)
	back, err := kvroute.LoadConfig(strings.NewReader(`{"events": {"tracing": {"enabled": true}}}`))
	require.NoError(t, err)
	require.Equal(t, back.Events.Tracing, cfg.Events.Tracing)

	cfg, err = llmd.Translate(strings.NewReader(`{"precise-prefix-cache-producer": {"kvEventsConfig": {"tracing": false}}}`))
	require.NoError(t, err)
	require.False(t, cfg.Events.Tracing.Enabled)

	_, err = llmd.Translate(strings.NewReader(`{"precise-prefix-cache-producer": {"kvEventsConfig": {"tracing": true}}, "events": {"tracing": {"enabled": false}}}`))
	require.ErrorContains(t, err, "set the same setting")

	p := "precise-prefix-cache-producer.kvEventsConfig.podDiscoveryConfig."
	_, findings, err := llmd.Load(strings.NewReader(`{"precise-prefix-cache-producer": {"kvEventsConfig": {"podDiscoveryConfig":
		{"socketPort": 5556, "dataParallelSize": 2, "rankPodMapping": {"groupLabelKey": "g", "rankLabelKey": "r"}}}}}`), llmd.Options{})
	require.NoError(t, err)
	requireFindings(t, findings, want{p + "dataParallelSize", llmd.NotNeeded}, want{p + "rankPodMapping", llmd.NoEquivalent})
}
