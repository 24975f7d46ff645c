package kvroute

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/kvevents"
	"github.com/kvroute/kvroute/kvevents/publish"
	"github.com/kvroute/kvroute/telemetry"
)

// TestReadyWaitsForLiveStreamsThenGivesUpOnDeadOnes: one engine publishes
// (with replay), the other endpoint has nothing listening. The router is
// not ready until SetEndpoints, then not while the dead endpoint connects;
// dropping the dead one makes it ready; re-adding it, the give-up clock
// (on the router's clock) releases readiness after GiveUpAfter.
func TestReadyWaitsForLiveStreamsThenGivesUpOnDeadOnes(t *testing.T) {
	defer leakcheck.Check(t)()
	const engineID = "127.0.0.1:18000"
	pub, err := publish.New(publish.Config{
		Addr: "tcp://127.0.0.1:0", Endpoint: engineID, Model: testModel, ReplayAddr: "tcp://127.0.0.1:0",
	}, publish.Options{})
	require.NoError(t, err)
	defer pub.Close()

	clock := newFakeClock()
	reg := prometheus.NewRegistry()
	cfg := DefaultConfig()
	cfg.Model = testModel
	cfg.DisableRender = true
	cfg.Readiness.GiveUpAfter = time.Minute
	r, err := New(context.Background(), cfg, Options{Set: telemetry.Set{Logger: testLogger(t), Registerer: reg, Clock: clock}})
	require.NoError(t, err)
	defer r.Close()
	require.False(t, r.Ready(), "no endpoints set")
	require.Equal(t, "endpoints not set", r.NotReady())

	live := Endpoint{ID: engineID, EventsAddress: pub.Endpoint(), ReplayAddress: pub.ReplayEndpoint()}
	dead := Endpoint{ID: "127.0.0.1:18001", EventsAddress: "tcp://127.0.0.1:1", ReplayAddress: "tcp://127.0.0.1:1"}
	require.NoError(t, r.SetEndpoints([]Endpoint{live, dead}))
	require.Eventually(t, func() bool {
		rd := r.Readiness()
		return len(rd) == 2 && rd[0].State == kvevents.StateLive
	}, 10*time.Second, 10*time.Millisecond, "the idle engine's replay on connect makes it live")
	require.False(t, r.Ready())
	require.Contains(t, r.NotReady(), "127.0.0.1:18001 connecting")
	n, err := testutil.GatherAndCount(reg, "kvroute_kv_events_stream_state")
	require.NoError(t, err)
	require.Equal(t, 8, n, "4 states of 2 endpoints")

	require.NoError(t, r.SetEndpoints([]Endpoint{live}))
	require.True(t, r.Ready())
	require.Empty(t, r.NotReady())

	require.NoError(t, r.SetEndpoints([]Endpoint{live, dead}))
	require.False(t, r.Ready())
	clock.Add(59 * time.Second)
	require.False(t, r.Ready())
	clock.Add(time.Second)
	require.True(t, r.Ready(), "given up on after a minute")
	rd := r.Readiness()
	require.True(t, rd[1].GivenUp)
	require.False(t, rd[0].GivenUp)
}

func TestReadyWithoutEventsIsAlwaysTrue(t *testing.T) {
	r := testRouter(t, nil, Options{})
	require.True(t, r.Ready())
	require.Nil(t, r.Readiness())
	require.Empty(t, r.NotReady())
}

// TestNotReadyAcrossAnEndpointSwap: endpoints replaced by others that have
// not caught up (a pod replaced through discovery) leave the router not
// ready at every instant of the swap. SetEndpoints subscribes the new
// endpoint before it unsubscribes the old one, so a reader that listed the
// endpoints before the new one was subscribed and read their states after
// the old one was removed must still see the old one's state, not an empty
// set that reads as ready.
func TestNotReadyAcrossAnEndpointSwap(t *testing.T) {
	defer leakcheck.Check(t)()
	cfg := DefaultConfig()
	cfg.Model = testModel
	cfg.DisableRender = true
	r, err := New(context.Background(), cfg, Options{Set: telemetry.Set{Logger: testLogger(t), Registerer: prometheus.NewRegistry()}})
	require.NoError(t, err)
	defer r.Close()
	// Nothing listens at either endpoint's addresses: both stay connecting.
	eps := []Endpoint{
		{ID: "127.0.0.1:18001", EventsAddress: "tcp://127.0.0.1:1", ReplayAddress: "tcp://127.0.0.1:1"},
		{ID: "127.0.0.1:18002", EventsAddress: "tcp://127.0.0.1:1", ReplayAddress: "tcp://127.0.0.1:1"},
	}
	require.NoError(t, r.SetEndpoints(eps[:1]))
	require.NotEmpty(t, r.NotReady())

	stop := make(chan struct{})
	ready := make(chan struct{}, 1)
	var polls atomic.Int64
	polled := make(chan struct{})
	go func() {
		defer close(polled)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if r.NotReady() == "" {
				select {
				case ready <- struct{}{}:
				default:
				}
			}
			polls.Add(1)
		}
	}()
	const swaps = 300
	for i := range swaps {
		// Each swap starts once the reader has read the router again, so
		// that every one of them is watched.
		for n := polls.Load(); polls.Load() < n+2; {
			runtime.Gosched()
		}
		require.NoError(t, r.SetEndpoints(eps[(i+1)%2:][:1]))
	}
	close(stop)
	<-polled
	select {
	case <-ready:
		t.Fatal("NotReady returned \"\" while every endpoint was connecting")
	default:
	}
}
