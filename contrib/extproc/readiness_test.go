package extproc

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/kvevents"
)

// countingSource counts how often FollowReadiness asked, so that a test
// knows its latest answer was taken into account.
type countingSource struct {
	src   ReadinessSource
	asked atomic.Int64
}

func (c *countingSource) NotReady() string {
	defer c.asked.Add(1)
	return c.src.NotReady()
}

// FollowReadiness reports not ready without endpoints and while an
// endpoint's KV-event stream has not caught up, ready once the router is,
// and not ready again when an endpoint that has not caught up joins.
func TestFollowReadinessFollowsTheRouter(t *testing.T) {
	defer leakcheck.Check(t)()
	h := newHarness(t, Config{}) // no endpoints; the harness marked it ready
	defer h.close()
	hc := healthpb.NewHealthClient(h.conn)
	check := func(svc string) healthpb.HealthCheckResponse_ServingStatus {
		resp, err := hc.Check(ctxT(t), &healthpb.HealthCheckRequest{Service: svc})
		require.NoError(t, err)
		return resp.GetStatus()
	}
	serving := func(want healthpb.HealthCheckResponse_ServingStatus) func() bool {
		return func() bool {
			for _, svc := range []string{ReadinessService, ExtProcService, ""} {
				if check(svc) != want {
					return false
				}
			}
			return true
		}
	}
	setEndpoints := func(eps ...kvroute.Endpoint) {
		require.NoError(t, h.router.SetEndpoints(eps))
		h.picker.SetEndpoints(eps)
	}
	src := &countingSource{src: h.router}
	ctx, cancel := context.WithCancel(context.Background())
	followed := make(chan struct{})
	go func() { defer close(followed); h.picker.FollowReadiness(ctx, src, 5*time.Millisecond) }()
	defer func() { cancel(); <-followed }()

	require.Eventually(t, serving(healthpb.HealthCheckResponse_NOT_SERVING), wait, 5*time.Millisecond, "no endpoints")
	require.Equal(t, healthpb.HealthCheckResponse_SERVING, check(LivenessService))

	// Nothing publishes at the endpoint's event address: it stays connecting.
	dead := kvroute.Endpoint{ID: "127.0.0.1:1", EventsAddress: "tcp://127.0.0.1:1", ReplayAddress: "tcp://127.0.0.1:1"}
	setEndpoints(dead)
	require.Eventually(t, func() bool {
		rd := h.router.Readiness()
		return len(rd) == 1 && rd[0].State == kvevents.StateConnecting
	}, wait, 5*time.Millisecond)
	asked := src.asked.Load()
	require.Eventually(t, func() bool { return src.asked.Load() >= asked+2 }, wait, time.Millisecond)
	require.True(t, serving(healthpb.HealthCheckResponse_NOT_SERVING)(), "an endpoint still connecting")

	e := startEngine(t, engineOpts{})
	h.engines = append(h.engines, e)
	setEndpoints(e.endpoint())
	require.Eventually(t, serving(healthpb.HealthCheckResponse_SERVING), wait, 5*time.Millisecond, "the engine's stream caught up")
	require.Empty(t, h.router.NotReady())

	setEndpoints(e.endpoint(), dead)
	require.Eventually(t, serving(healthpb.HealthCheckResponse_NOT_SERVING), wait, 5*time.Millisecond, "a joining endpoint not caught up")

	// After Shutdown the health service stays down whatever the router says.
	setEndpoints(e.endpoint())
	require.Eventually(t, serving(healthpb.HealthCheckResponse_SERVING), wait, 5*time.Millisecond)
	h.picker.Shutdown()
	asked = src.asked.Load()
	require.Eventually(t, func() bool { return src.asked.Load() >= asked+2 }, wait, time.Millisecond)
	require.True(t, serving(healthpb.HealthCheckResponse_NOT_SERVING)())
}
