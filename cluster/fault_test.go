package cluster_test

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/internal/redistest"
	"github.com/kvroute/kvroute/telemetry"
)

// envHelper makes the test binary act as a separate router replica process
// (see TestHelperReplicaProcess).
const envHelper = "KVROUTE_CLUSTER_HELPER_REDIS"

// TestHelperReplicaProcess is not a test: run with envHelper set (by
// TestSIGKILLedReplicaLoadExpires), it joins the pool as replica "victim",
// dispatches one request of 5,000 uncached tokens to 10.0.0.1:8000, prints
// "ready" and blocks until it is killed.
func TestHelperReplicaProcess(t *testing.T) {
	addr := os.Getenv(envHelper)
	if addr == "" {
		t.Skip("helper process for TestSIGKILLedReplicaLoadExpires")
	}
	cfg := kvroute.DefaultConfig()
	cfg.Model = testModel
	cfg.Events.Enabled = new(false)
	cfg.DisableRender = true
	cfg.Cluster = fastCluster(addr, "victim")
	r, err := kvroute.New(context.Background(), cfg, kvroute.Options{})
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	if err := r.SetEndpoints(endpoints(1)); err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	h := r.Load().Dispatch("10.0.0.1:8000", 5000)
	_ = h
	fmt.Println("ready")
	select {} // until SIGKILL
}

// A replica process killed with SIGKILL (no cleanup of any kind) holds load
// in its peers' view only until its lease expires.
func TestSIGKILLedReplicaLoadExpires(t *testing.T) {
	defer leakcheck.Check(t)()
	srv := redistest.Start(t)
	defer srv.Stop()
	eps := endpoints(1)
	a := newRouter(t, srv.Addr, "a", nil, kvroute.Options{})
	defer a.Close()

	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperReplicaProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), envHelper+"="+srv.Addr)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "ready", strings.TrimSpace(line))

	require.Eventually(t, func() bool { return loads(a, eps)[eps[0].ID] == [2]int64{5000, 1} && len(a.Cluster().Peers()) == 1 },
		waitFor, 5*time.Millisecond, "the other process's load must reach a: %v", loads(a, eps))
	require.Equal(t, "victim", a.Cluster().Peers()[0].ID)

	require.NoError(t, cmd.Process.Kill()) // SIGKILL
	_ = cmd.Wait()
	killed := time.Now()
	require.Eventually(t, func() bool { return loads(a, eps)[eps[0].ID] == [2]int64{} }, waitFor, 5*time.Millisecond,
		"the killed replica's load must expire with its lease")
	t.Logf("SIGKILLed replica's load released %v after the kill (lease %v)", time.Since(killed).Round(time.Millisecond),
		a.Cluster().Config().Lease)
	require.Empty(t, a.Cluster().Peers())
}

// Redis stopped mid-load: every replica goes degraded (local load only,
// logged once, Pick unaffected) and, when Redis comes back empty, the replicas
// re-register and the shared load resumes by itself.
func TestRedisStoppedAndRestartedMidLoad(t *testing.T) {
	defer leakcheck.Check(t)()
	srv := redistest.Start(t)
	defer srv.Stop()
	eps := endpoints(3)
	logs := &logCounter{}
	a := newRouter(t, srv.Addr, "a", nil, kvroute.Options{Set: telemetry.Set{Logger: slog.New(logs)}})
	b := newRouter(t, srv.Addr, "b", nil, kvroute.Options{})
	defer a.Close()
	defer b.Close()
	var held []*kvroute.Decision
	for i := 0; i < 12; i++ {
		r := []*kvroute.Router{a, b}[i%2]
		held = append(held, pick(t, r, prompt(10+i, 2000), eps))
	}
	sum := localSum(eps, a, b)
	require.Eventually(t, func() bool { return equalLoads(loads(a, eps), sum) && equalLoads(loads(b, eps), sum) },
		waitFor, 5*time.Millisecond)

	require.NoError(t, srv.Stop())
	require.Eventually(t, func() bool { return a.Cluster().Degraded() && b.Cluster().Degraded() }, waitFor, 5*time.Millisecond)
	require.Equal(t, localSum(eps, a), loads(a, eps), "degraded: local load only")
	require.Equal(t, localSum(eps, b), loads(b, eps))
	require.Empty(t, a.Cluster().Peers())
	// Routing goes on from memory while Redis is away.
	for i := 0; i < 6; i++ {
		d := pick(t, a, prompt(100+i, 1000), eps)
		held = append(held, d)
	}
	// Keep failing for several periods: still one outage log.
	failures := func() float64 { return float64(a.Cluster().Stats().Reads) }
	before := failures()
	require.Never(t, func() bool { return failures() != before }, 300*time.Millisecond, 10*time.Millisecond,
		"no read succeeds while Redis is down")
	require.Equal(t, 1, logs.count("Redis unreachable"), "logged once per outage")

	require.NoError(t, srv.Restart())
	require.Eventually(t, func() bool { return !a.Cluster().Degraded() && !b.Cluster().Degraded() }, waitFor, 5*time.Millisecond)
	sum = localSum(eps, a, b)
	require.Eventually(t, func() bool { return equalLoads(loads(a, eps), sum) && equalLoads(loads(b, eps), sum) },
		waitFor, 5*time.Millisecond, "shared load resumes after Redis returns: a %v b %v want %v", loads(a, eps), loads(b, eps), sum)
	require.Equal(t, 1, logs.count("Redis answers again"))
	// The decision subscription came back too: b's decisions reach a again.
	applied := a.Cluster().Stats().Applied
	n := 0
	require.Eventually(t, func() bool {
		n++
		pick(t, b, prompt(1000+n, 1000), eps).Done(kvroute.DoneInfo{})
		return a.Cluster().Stats().Applied > applied
	}, waitFor, 20*time.Millisecond, "decisions are shared again after Redis returned")
	require.Equal(t, 1, logs.count("Redis unreachable"))
	for _, d := range held {
		d.Done(kvroute.DoneInfo{})
	}
}

// A Redis that answers reads but refuses writes (here a primary that
// requires a replica it does not have: NOREPLICAS; a read-only replica or a
// full Redis refusing writes acts alike) keeps the replica degraded, its
// outage logged and counted once: only a write succeeding ends an outage
// a failed write began, so the replica does not flap between degraded and
// healthy at every read. When writes succeed again, it recovers once.
func TestRedisRefusingWritesKeepsReplicaDegraded(t *testing.T) {
	defer leakcheck.Check(t)()
	srv := redistest.Start(t)
	defer srv.Stop()
	logs := &logCounter{}
	a := newRouter(t, srv.Addr, "a", nil, kvroute.Options{Set: telemetry.Set{Logger: slog.New(logs)}})
	defer a.Close()
	require.Eventually(t, func() bool { return !a.Cluster().Degraded() && a.Cluster().Stats().Reads > 0 }, waitFor, 5*time.Millisecond)

	admin := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer admin.Close()
	require.NoError(t, admin.ConfigSet(context.Background(), "min-replicas-to-write", "1").Err())
	require.Error(t, admin.Set(context.Background(), "probe", "x", 0).Err(), "writes are refused")
	require.NoError(t, admin.Exists(context.Background(), "probe").Err(), "reads are served")
	require.Eventually(t, a.Cluster().Degraded, waitFor, 5*time.Millisecond)
	reads := a.Cluster().Stats().Reads
	require.Never(t, func() bool { return !a.Cluster().Degraded() }, time.Second, time.Millisecond,
		"reads succeed, writes fail: the replica stays degraded")
	require.Greater(t, a.Cluster().Stats().Reads, reads, "the reads went on succeeding")
	require.Equal(t, 1, logs.count("Redis unreachable"), "one outage")
	require.Zero(t, logs.count("Redis answers again"))

	require.NoError(t, admin.ConfigSet(context.Background(), "min-replicas-to-write", "0").Err())
	require.Eventually(t, func() bool { return !a.Cluster().Degraded() }, waitFor, 5*time.Millisecond)
	require.Equal(t, 1, logs.count("Redis answers again"))
	require.Equal(t, 1, logs.count("Redis unreachable"))
}
