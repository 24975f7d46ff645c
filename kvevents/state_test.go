package kvevents

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/internal/zmqpub"
)

func stateOf(p *Pool, id string) StreamState {
	st, _ := p.Status(id)
	return st.State
}

// An idle engine with a replay buffer is live once the proactive replay
// has run; a publisher that goes away leaves the stream degraded.
func TestStreamStateLiveAfterReplayThenDegradedWhenPublisherGoes(t *testing.T) {
	defer leakcheck.Check(t)()
	ix := newPoolIndex(t)
	pub := newTestPublisher(t, zmqpub.Config{Endpoint: "127.0.0.1:8000", Model: poolModel, ReplayAddr: "127.0.0.1:0"})
	defer pub.Close()
	last := publishN(t, pub, 2)
	p, _ := newTestPool(t, PoolConfig{MaxBackoff: 50 * time.Millisecond}, ix)
	defer p.Close()
	const id = "127.0.0.1:8000"
	before := time.Now()
	require.NoError(t, p.Ensure(Endpoint{ID: id, Model: poolModel, EventsAddress: pub.Endpoint(), ReplayAddress: pub.ReplayEndpoint()}))
	require.Contains(t, []StreamState{StateConnecting, StateReplaying, StateLive}, stateOf(p, id))
	waitApplied(t, p, id, last)
	require.Eventually(t, func() bool { return stateOf(p, id) == StateLive }, poolWait, poolTick)
	st, _ := p.Status(id)
	require.False(t, st.LastApplied.Before(before), "last applied %v", st.LastApplied)

	reg := prometheus.NewRegistry()
	require.NoError(t, reg.Register(NewStateCollector(p, func() time.Time { return st.LastApplied.Add(3 * time.Second) })))
	require.NoError(t, testutil.GatherAndCompare(reg, stringsReader(`
# HELP kvroute_kv_events_seconds_since_last_applied Seconds since the endpoint's last KV-event batch was applied to the index (an idle engine publishes nothing, so this grows while it idles).
# TYPE kvroute_kv_events_seconds_since_last_applied gauge
kvroute_kv_events_seconds_since_last_applied{pod_identifier="127.0.0.1:8000"} 3
# HELP kvroute_kv_events_stream_state Per-endpoint KV-event stream state (1 for the current one): connecting, replaying, live, degraded.
# TYPE kvroute_kv_events_stream_state gauge
kvroute_kv_events_stream_state{pod_identifier="127.0.0.1:8000",state="connecting"} 0
kvroute_kv_events_stream_state{pod_identifier="127.0.0.1:8000",state="degraded"} 0
kvroute_kv_events_stream_state{pod_identifier="127.0.0.1:8000",state="live"} 1
kvroute_kv_events_stream_state{pod_identifier="127.0.0.1:8000",state="replaying"} 0
`)))

	require.NoError(t, pub.Close()) // the engine dies
	require.Eventually(t, func() bool { return stateOf(p, id) == StateDegraded }, poolWait, poolTick)
	require.NoError(t, p.Close())
}

// Without a replay address nothing can be caught up on: a subscribed
// stream is live at once, even before any message.
func TestStreamStateLiveWithoutReplayOnceSubscribed(t *testing.T) {
	defer leakcheck.Check(t)()
	ix := newPoolIndex(t)
	pub := newTestPublisher(t, zmqpub.Config{Endpoint: "127.0.0.1:8000", Model: poolModel})
	defer pub.Close()
	p, _ := newTestPool(t, PoolConfig{}, ix)
	defer p.Close()
	const id = "127.0.0.1:8000"
	require.NoError(t, p.Ensure(Endpoint{ID: id, Model: poolModel, EventsAddress: pub.Endpoint()}))
	require.Eventually(t, func() bool { return stateOf(p, id) == StateLive }, poolWait, poolTick)
	st, _ := p.Status(id)
	require.True(t, st.LastApplied.IsZero())
	require.NoError(t, p.Close())
	require.NoError(t, pub.Close())
}

// An endpoint whose publisher never answers stays connecting.
func TestStreamStateConnectingWhileUnreachable(t *testing.T) {
	defer leakcheck.Check(t)()
	ix := newPoolIndex(t)
	p, _ := newTestPool(t, PoolConfig{}, ix)
	defer p.Close()
	const id = "127.0.0.1:8000"
	require.NoError(t, p.Ensure(Endpoint{ID: id, Model: poolModel, EventsAddress: "tcp://127.0.0.1:1", ReplayAddress: "tcp://127.0.0.1:1"}))
	require.Eventually(t, func() bool {
		return testutil.ToFloat64(p.metrics().ZMQErrors.WithLabelValues(id, "connect")) >= 1
	}, poolWait, poolTick, "the dial failed at least once")
	require.Equal(t, StateConnecting, stateOf(p, id))
	require.NoError(t, p.Close())
}

func stringsReader(s string) *strings.Reader { return strings.NewReader(s) }
