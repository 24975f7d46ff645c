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

// The cluster section is validated whether addrs is set or not: a mistake
// in it is reported when the file is read, not first when addrs is added.
func TestConfigClusterSectionValidatedWithoutAddrs(t *testing.T) {
	for _, tc := range []struct{ section, want string }{
		{`{"pool":"{m}"}`, "pool"},
		{`{"replicaId":"a b"}`, "replicaId"},
		{`{"snapshotUrl":"10.1.0.5:9090/snapshot"}`, "snapshotUrl"},
		{`{"refreshPeriod":"-1s"}`, "refreshPeriod"},
		{`{"lease":"100ms"}`, "lease"},
		{`{"decisionQueue":-1}`, "decisionQueue"},
		{`{"maxPeers":100000}`, "maxPeers"},
		{`{"db":-1}`, "db"},
		{`{"db":1,"clusterMode":true}`, "db"},
	} {
		_, err := LoadConfig(strings.NewReader(`{"model":"m","cluster":` + tc.section + `}`))
		require.ErrorIs(t, err, ErrInvalidConfig, tc.section)
		require.ErrorContains(t, err, "cluster: ", tc.section)
		require.ErrorContains(t, err, tc.want, tc.section)
	}
	cfg, err := LoadConfig(strings.NewReader(`{"model":"m","cluster":{"pool":"m","lease":"5s"}}`))
	require.NoError(t, err, "valid keys without addrs")
	require.False(t, cfg.Cluster.Enabled(), "no addrs: no cluster")
}
