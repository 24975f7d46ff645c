package kvevents

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/internal/zmqpub"
	"github.com/kvroute/kvroute/telemetry"
)

// With heartbeats disabled the idle deadline recycles an idle engine's
// socket, and the check after each recycle normally finds nothing: like a
// tail or join probe it keeps the stream's readiness state, so the
// endpoint of an idle, healthy engine stays live across recycles. Before,
// each recycle took it to degraded while the socket was recreated and to
// replaying while the check ran (for an engine that had published nothing,
// a full connect replay, logged and counted as a replay every time): a
// router in front of idle engines turned not-ready once per idle deadline.
func TestQuietRecycleKeepsIdleEndpointLive(t *testing.T) {
	for _, tc := range []struct {
		name    string
		publish bool // the engine published batches before it went idle
	}{{"empty engine", false}, {"engine with a watermark", true}} {
		t.Run(tc.name, func(t *testing.T) {
			defer leakcheck.Check(t)()
			ix := newPoolIndex(t)
			const id = "127.0.0.1:8000"
			pub := newTestPublisher(t, zmqpub.Config{Endpoint: id, Model: poolModel, ReplayAddr: "127.0.0.1:0"})
			defer pub.Close()
			logs := &logBuffer{}
			p, err := NewPool(PoolConfig{HeartbeatInterval: -1, IdleTimeout: 150 * time.Millisecond, TailProbeDelay: -1}, ix,
				Options{Set: telemetry.Set{Registerer: prometheus.NewRegistry(), Logger: debugLogger(logs)}})
			require.NoError(t, err)
			defer p.Close()
			require.NoError(t, p.Ensure(Endpoint{ID: id, Model: poolModel, EventsAddress: pub.Endpoint(), ReplayAddress: pub.ReplayEndpoint()}))
			if tc.publish {
				waitAppliedLogs(t, p, id, publishUntilReceived(t, p, pub, id), logs)
			}
			require.Eventually(t, func() bool {
				st := statusOf(p, id)
				return st.State == StateLive && !st.Replaying
			}, poolWait, poolTick, "never live\n%s", logs)
			before := statusOf(p, id)
			replays := counter(p.metrics().Replays, id, replayComplete)
			recycles := logs.count("No KV events within the idle deadline")
			// The connect replays before the recycles: one, or two when the
			// engine's first batch arrived just after an empty connect
			// replay, which asks again from it (a join, not a recycle).
			connects := logs.count("Requesting proactive replay on connect")

			// Each recycle's check counts an empty probe once it has ended.
			require.Eventually(t, func() bool { return counter(p.sm.Probes, id, probeEmpty) >= 3 }, poolWait, poolTick,
				"no checks after recycles\n%s", logs)
			require.Greater(t, logs.count("No KV events within the idle deadline"), recycles, "no recycle\n%s", logs)
			after := statusOf(p, id)
			require.Equal(t, StateLive, after.State, logs.String())
			require.Equal(t, before.Since, after.Since, "a recycle took the idle endpoint out of live and back\n%s", logs)
			require.Equal(t, replays, counter(p.metrics().Replays, id, replayComplete), "a recycle's check is no replay\n%s", logs)
			require.Equal(t, connects, logs.count("Requesting proactive replay on connect"), "a recycle asked for a connect replay\n%s", logs)
			require.Zero(t, counter(p.metrics().Reconnections, id))
		})
	}
}
