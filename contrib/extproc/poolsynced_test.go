package extproc

import (
	"net"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/kvroute/kvroute/internal/leakcheck"
)

// The health name the Inference Extension's manifests probe their picker by
// (liveness and readiness alike) is answered: not serving until discovery
// gave the first endpoint set, even an empty one, then serving whatever the
// index's readiness, and not serving after Shutdown. A name the health
// service did not know would fail both probes, and Kubernetes would never
// send traffic to the picker and restart it without end.
func TestHealthPoolSyncedService(t *testing.T) {
	defer leakcheck.Check(t)()
	s, err := New(Config{}, staticSource{}, Options{})
	require.NoError(t, err)
	defer s.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	g := grpc.NewServer()
	s.Register(g)
	served := make(chan struct{})
	go func() { defer close(served); _ = g.Serve(ln) }()
	defer func() { g.Stop(); <-served }()
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()
	hc := healthpb.NewHealthClient(conn)
	check := func(svc string) healthpb.HealthCheckResponse_ServingStatus {
		resp, err := hc.Check(ctxT(t), &healthpb.HealthCheckRequest{Service: svc})
		require.NoError(t, err, svc)
		return resp.GetStatus()
	}

	require.Equal(t, healthpb.HealthCheckResponse_NOT_SERVING, check(PoolSyncedService), "before discovery synced")
	s.SetEndpoints(nil) // discovery synced a pool without pods yet
	require.Equal(t, healthpb.HealthCheckResponse_SERVING, check(PoolSyncedService))
	require.Equal(t, healthpb.HealthCheckResponse_NOT_SERVING, check(ReadinessService), "readiness still follows the index")
	s.SetReady(true)
	s.SetReady(false)
	require.Equal(t, healthpb.HealthCheckResponse_SERVING, check(PoolSyncedService), "not tied to the index's readiness")
	s.Shutdown()
	require.Equal(t, healthpb.HealthCheckResponse_NOT_SERVING, check(PoolSyncedService), "draining")
}
