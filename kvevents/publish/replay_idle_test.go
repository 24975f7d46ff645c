package publish

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/internal/zmqx"
	"github.com/kvroute/kvroute/telemetry"
)

// ReplayIdleTimeout reaches the replay server: a client that connects and
// then says nothing is closed once it has been silent that long, and
// counted.
func TestReplayIdleTimeoutClosesSilentClients(t *testing.T) {
	defer leakcheck.Check(t)()
	var c Config
	require.NoError(t, json.Unmarshal([]byte(`{"addr": "127.0.0.1:0", "replayAddr": "127.0.0.1:0", "replayIdleTimeout": "100ms"}`), &c))
	require.Equal(t, 100*time.Millisecond, c.ReplayIdleTimeout)
	reg := prometheus.NewRegistry()
	p := newTestPublisher(t, c, Options{Set: telemetry.Set{Registerer: reg}})
	defer func() { require.NoError(t, p.Close()) }()

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	d := zmqx.NewDealer(ctx, zmqx.Options{}, nil)
	require.NoError(t, zmqx.Dial(d, p.ReplayEndpoint()))
	defer func() { _ = d.Close() }()
	idle := func() float64 {
		mfs, err := reg.Gather()
		require.NoError(t, err)
		for _, mf := range mfs {
			if mf.GetName() == "kvroute_replay_server_idle_closed_total" {
				return mf.GetMetric()[0].GetCounter().GetValue()
			}
		}
		return 0
	}
	require.Eventually(t, func() bool { return idle() == 1 }, 30*time.Second, time.Millisecond,
		"a silent replay client is closed after replayIdleTimeout")
}
