package e2e

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
)

// requireRedisServer skips without redis-server on PATH unless
// KVROUTE_REQUIRE_REDIS=1.
func requireRedisServer(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		if os.Getenv("KVROUTE_REQUIRE_REDIS") == "1" {
			t.Fatalf("KVROUTE_REQUIRE_REDIS=1 but: %v", err)
		}
		t.Skipf("redis-server not on PATH: %v", err)
	}
}

// TestRunReplicasKeepsBurstTogetherAndSurvivesAKill runs the --replicas 2
// demo: a real redis-server, two real gateways (one a child process), the
// burst on one engine across both, the child SIGKILLed and its load gone
// from the survivor's view within the lease; nothing left running.
func TestRunReplicasKeepsBurstTogetherAndSurvivesAKill(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the replicas demo")
	}
	requireRedisServer(t)
	defer leakcheck.Check(t)()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out bytes.Buffer
	rep, err := RunReplicas(ctx, Options{Fast: true}, &out)
	require.NoError(t, err, out.String())
	require.Len(t, rep.Routed, 1, "the burst stayed on one engine:\n%s", out.String())
	require.Equal(t, 5, rep.ByGateway[rep.Gateways[0]])
	require.Equal(t, 5, rep.ByGateway[rep.Gateways[1]], "both gateways routed half of it")
	require.EqualValues(t, 4, rep.PeerRequests)
	require.Less(t, rep.PeerLoadGone, demoLease+5*time.Second, "gone within the lease (generous for a loaded machine)")
	require.Equal(t, 3, rep.After)
	for _, want := range []string{"PASS: 10 of 10 requests", "killed with SIGKILL", "PASS: gw-1 carries on alone"} {
		require.Contains(t, out.String(), want)
	}
}

// TestRunReplicasWithoutRedisServer: no redis-server on PATH is a clear
// error, nothing started.
func TestRunReplicasWithoutRedisServer(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, err := RunReplicas(context.Background(), Options{Fast: true}, &bytes.Buffer{})
	require.ErrorIs(t, err, ErrNoRedis)
}
