package kvevents

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/replay"
)

func TestPoolConfigValidationAndJSON(t *testing.T) {
	_, err := NewPool(PoolConfig{}, nil, Options{})
	require.Error(t, err)
	for _, bad := range []PoolConfig{
		{Concurrency: -1}, {QueueSize: -1}, {EventsPort: 70000}, {ReplayPort: -2},
		{MinBackoff: time.Second, MaxBackoff: time.Millisecond}, {HandshakeTimeout: -1},
		{BindAddress: "ipc:///tmp/kv"}, {BindAddress: "no-port"}, {ReplayClient: replay.ClientConfig{Timeout: -1}},
		{TopicFilter: strings.Repeat("k", 4097)},
	} {
		require.Error(t, bad.Validate(), "%+v", bad)
	}

	require.NoError(t, PoolConfig{TopicFilter: strings.Repeat("k", 4096)}.Validate())

	cfg, err := LoadPoolConfig(strings.NewReader(`{"concurrency": 2,
		"replay": true, "idleTimeout": "30s", "replayClient": {"timeout": "1m"}}`))
	require.NoError(t, err)
	require.Equal(t, 2, cfg.Concurrency)
	require.Equal(t, 30*time.Second, cfg.IdleTimeout)
	require.Equal(t, time.Minute, cfg.ReplayClient.Timeout)
	_, err = LoadPoolConfig(strings.NewReader(`{"concurency": 2}`))
	require.ErrorContains(t, err, "concurency: unknown key")
	_, err = LoadPoolConfig(strings.NewReader(`{"replayClient": {"timeout": 60000000000}}`))
	require.ErrorContains(t, err, "replayClient.timeout: bare number 60000000000 is not a duration")

	d := PoolConfig{}.withDefaults()
	require.Equal(t, defaultConcurrency, d.Concurrency)
	require.Equal(t, defaultIdleTimeout, d.IdleTimeout)
	require.Equal(t, 100*time.Millisecond, d.MinBackoff)
	require.Equal(t, 2*time.Second, d.MaxBackoff)
	require.Zero(t, PoolConfig{IdleTimeout: -1}.withDefaults().IdleTimeout, "negative disables")

	ep, err := Endpoint{ID: "10.0.0.7:8000", Rank: 1}.resolve(&PoolConfig{EventsPort: 5556, ReplayPort: 5559, Replay: true})
	require.NoError(t, err)
	require.Equal(t, "tcp://10.0.0.7:5557", ep.EventsAddress, "rank offsets the port")
	require.Equal(t, "tcp://10.0.0.7:5560", ep.ReplayAddress)
	ep, err = Endpoint{ID: "[fd00::1]:8000"}.resolve(&PoolConfig{EventsPort: 5556})
	require.NoError(t, err)
	require.Equal(t, "tcp://[fd00::1]:5556", ep.EventsAddress)
	require.Empty(t, ep.ReplayAddress, "no replay unless enabled or given")

	// A rank that carries a port past 65535 is a configuration error, not
	// an address every dial would fail on.
	// The error names the port and the rank the address was derived from.
	_, err = Endpoint{ID: "10.0.0.7:8000", Rank: 2}.resolve(&PoolConfig{EventsPort: 65534})
	require.ErrorContains(t, err, "events address derived from port 65534 + rank 2")
	_, err = Endpoint{ID: "10.0.0.7:8000", Rank: 1}.resolve(&PoolConfig{EventsPort: 5556, ReplayPort: 65535, Replay: true})
	require.ErrorContains(t, err, "replay address derived from port 65535 + rank 1")
	_, err = Endpoint{ID: "10.0.0.7:8000", EventsAddress: "tcp://10.0.0.7:70000"}.resolve(&PoolConfig{EventsPort: 5556})
	require.ErrorContains(t, err, "events address: ", "a given address derives from nothing")
	_, err = Endpoint{ID: "10.0.0.7:8000", Rank: 3}.resolve(&PoolConfig{EventsPort: 5556, Snapshot: SnapshotConfig{Enabled: true, Port: 65533}})
	require.ErrorContains(t, err, "snapshot address derived from port 65533 + rank 3")

	// The ID becomes the pod_identifier label value: a host longer than a
	// DNS name is refused, and the error carries only a cut of it.
	_, err = Endpoint{ID: strings.Repeat("h", 1<<20) + ":8000"}.resolve(&PoolConfig{EventsPort: 5556})
	require.ErrorContains(t, err, "over 259")
	require.Less(t, len(err.Error()), 300)
	_, err = Endpoint{ID: "\xff:8000"}.resolve(&PoolConfig{EventsPort: 5556})
	require.ErrorContains(t, err, "UTF-8")
}
