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
