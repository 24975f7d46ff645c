package kvroute

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestConfigClusterSection(t *testing.T) {
	cfg, err := LoadConfig(strings.NewReader(`{"model":"m","cluster":{"addrs":["10.0.0.9:6379"],"pool":"m","snapshotUrl":"http://10.1.0.5:9090/snapshot"}}`))
	require.NoError(t, err)
	require.True(t, cfg.Cluster.Enabled())
	require.Equal(t, "m", cfg.Cluster.Pool)

	_, err = LoadConfig(strings.NewReader(`{"model":"m","cluster":{"addrs":["10.0.0.9:6379"],"pool":"{m}"}}`))
	require.ErrorIs(t, err, ErrInvalidConfig, "a pool with braces would break the hash tag")
	_, err = LoadConfig(strings.NewReader(`{"model":"m","cluster":{"adrs":["10.0.0.9:6379"]}}`))
	require.ErrorIs(t, err, ErrInvalidConfig, "unknown key")

	require.False(t, DefaultConfig().Cluster.Enabled(), "off by default")
}
