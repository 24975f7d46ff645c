package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kvroute/kvroute/contrib/extproc"
	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/internal/syncbuf"
	"github.com/kvroute/kvroute/telemetry"
)

// shortLeases makes the leader election's lease 2s (a Lease holds whole
// seconds), its renew deadline 1s and its retry period 20ms until the test
// ends: a released lease is taken over within a retry.
func shortLeases(t *testing.T) {
	t.Helper()
	prev := leaseTimings
	leaseTimings.lease, leaseTimings.renew, leaseTimings.retry = 2*time.Second, time.Second, 20*time.Millisecond
	t.Cleanup(func() { leaseTimings = prev })
}

// caughtUp is a router whose index has caught up.
type caughtUp struct{}

func (caughtUp) NotReady() string { return "" }

// Two replicas competing for one Lease: exactly one is ready, the other
// stands by with the reason; once the leader stops (releasing the lease)
// the other takes over and is ready. Both leave no goroutine behind.
func TestLeaderElectionReadiesOneReplica(t *testing.T) {
	defer leakcheck.Check(t)()
	shortLeases(t)
	kube := fake.NewClientset()
	f, err := parseFlags([]string{"--pool-name", "pool", "--pool-namespace", "llm", "--ha-enable-leader-election"}, io.Discard)
	require.NoError(t, err)
	ctx := context.Background()
	var leaders [2]*leader
	var gates [2]extproc.ReadinessSource
	for i := range leaders {
		leaders[i], err = startLeaderElection(ctx, f, kube, false, telemetry.Set{})
		require.NoError(t, err)
		defer leaders[i].stop()
		gates[i] = leaders[i].gate(caughtUp{})
	}
	var won, most int
	require.Eventually(t, func() bool {
		ready := 0
		for i, g := range gates {
			if g.NotReady() == "" {
				ready, won = ready+1, i
			}
		}
		most = max(most, ready)
		return ready == 1
	}, 20*time.Second, 5*time.Millisecond, "one replica takes the lease")
	require.Equal(t, 1, most, "two replicas ready at once")
	other := 1 - won
	require.Contains(t, gates[other].NotReady(), "standing by: another replica holds the leader election Lease llm/epp-llm-pool.llm-d.ai")
	lease, err := kube.CoordinationV1().Leases("llm").Get(ctx, "epp-llm-pool.llm-d.ai", metav1.GetOptions{})
	require.NoError(t, err)
	require.NotEmpty(t, lease.Spec.HolderIdentity)

	leaders[won].stop()
	require.NotEmpty(t, gates[won].NotReady(), "a stopped replica is not ready")
	require.Eventually(t, func() bool { return gates[other].NotReady() == "" }, 20*time.Second, 5*time.Millisecond,
		"the standby takes the released lease")
	require.NotEmpty(t, gates[won].NotReady())
}

// With a cluster block the replicas share their state, and leader election,
// honoured, is logged as not needed. Without --ha-enable-leader-election
// the picker's readiness is the router's alone; the flag needs a pool to elect in, and the Lease is named
// as llm-d's picker names it.
func TestLeaderElectionFlags(t *testing.T) {
	defer leakcheck.Check(t)()
	var logs bytes.Buffer
	clustered, err := startLeaderElection(context.Background(), flags{poolNamespace: "llm", llmdFlags: llmdFlags{leaderElection: true, leaseName: "l"}},
		fake.NewClientset(), true, telemetry.Set{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	require.NoError(t, err)
	clustered.stop()
	require.Contains(t, logs.String(), "is not needed: the replicas share their index and load through the cluster block")

	var none *leader
	require.Equal(t, caughtUp{}, none.gate(caughtUp{}))
	none.stop()

	_, err = parseFlags([]string{"--endpoints", "10.0.0.1:8000", "--ha-enable-leader-election"}, io.Discard)
	require.ErrorContains(t, err, "--ha-enable-leader-election")
	_, err = parseFlags([]string{"--pool-name", "p", "--ha-lease-name", "x"}, io.Discard)
	require.ErrorContains(t, err, "--ha-lease-name")

	f, err := parseFlags([]string{"--pool-name", "p", "--pool-namespace", "llm", "--ha-enable-leader-election"}, io.Discard)
	require.NoError(t, err)
	name, err := leaseName(f)
	require.NoError(t, err)
	require.Equal(t, "epp-llm-p.llm-d.ai", name)
	f.leaseName = "mine"
	name, err = leaseName(f)
	require.NoError(t, err)
	require.Equal(t, "mine", name)

	f, err = parseFlags([]string{"--endpoint-selector", "app=vllm", "--endpoint-target-ports", "8000", "--pool-namespace", "llm", "--ha-enable-leader-election"}, io.Discard)
	require.NoError(t, err)
	t.Setenv("POD_NAME", "router-epp-5d9c7b8f4-x2x1z")
	name, err = leaseName(f)
	require.NoError(t, err)
	require.Equal(t, "epp-llm-router-epp.llm-d.ai", name)
	t.Setenv("POD_NAME", "")
	_, err = leaseName(f)
	require.ErrorContains(t, err, "POD_NAME")
}

// Two kvroute-epp replicas of one --endpoint-selector pool with
// --ha-enable-leader-election, as llm-d's chart runs them: exactly one
// reports ready on its health port; when it shuts down it releases the
// lease and the other turns ready.
func TestRunLeaderElection(t *testing.T) {
	defer leakcheck.Check(t)()
	shortLeases(t)
	t.Setenv("POD_NAME", "router-epp-5d9c7b8f4-x2x1z")
	kube := fake.NewClientset(readyPod("llm", "vllm-0", "127.0.0.1", map[string]string{"app": "vllm"}))
	fakeKube(t, kube)
	cfg := fmt.Sprintf("model: %s\nblockSize: 16\nevents:\n  enabled: false\n", model)

	type replica struct {
		cancel context.CancelFunc
		done   chan error
		health healthpb.HealthClient
		logs   *syncbuf.Buffer
		ready  string // the /ready URL
	}
	var reps [2]replica
	for i := range reps {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		logs := &syncbuf.Buffer{}
		health, ready, done := startLoggedEPP(t, ctx, logs, "--endpoint-selector", "app=vllm", "--endpoint-target-ports", "8000", "--pool-namespace", "llm",
			"--ha-enable-leader-election", "--config-text", cfg, "--readiness-interval", "10ms")
		conn, err := grpc.NewClient(health, grpc.WithTransportCredentials(insecure.NewCredentials()))
		require.NoError(t, err)
		defer conn.Close()
		reps[i] = replica{cancel, done, healthpb.NewHealthClient(conn), logs, ready}
	}
	serving := func(r replica) bool {
		resp, err := r.health.Check(context.Background(), &healthpb.HealthCheckRequest{Service: extproc.ReadinessService})
		return err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_SERVING
	}
	var won, most int
	require.Eventually(t, func() bool {
		ready := 0
		for i, r := range reps {
			if serving(r) {
				ready, won = ready+1, i
			}
		}
		most = max(most, ready)
		return ready == 1
	}, 20*time.Second, 10*time.Millisecond, "the lease holder turns ready")
	require.Equal(t, 1, most, "two replicas ready at once")
	other := reps[1-won]
	require.Eventually(t, func() bool { return strings.Contains(other.logs.String(), "standing by: another replica holds") }, 20*time.Second, 10*time.Millisecond,
		"the standby's readiness, its pool synced, waits for the lease")
	require.False(t, serving(other), "the standby is not ready")
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	resp, err := client.Get(other.ready)
	require.NoError(t, err)
	var ready struct {
		Ready  bool   `json:"ready"`
		Reason string `json:"reason"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&ready))
	resp.Body.Close()
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	require.False(t, ready.Ready)
	require.Contains(t, ready.Reason, "standing by: another replica holds the leader election Lease llm/epp-llm-router-epp.llm-d.ai",
		"/ready says why the standby waits")
	require.True(t, serving(reps[won]))

	reps[won].cancel()
	require.NoError(t, <-reps[won].done)
	require.Eventually(t, func() bool { return serving(other) }, 20*time.Second, 10*time.Millisecond,
		"the standby takes the released lease and turns ready")
	other.cancel()
	require.NoError(t, <-other.done)
}

// startLoggedEPP runs the command as startEPP does, its info logs written
// to logs, and returns its health address, its /ready URL and its result.
func startLoggedEPP(t *testing.T, ctx context.Context, logs io.Writer, args ...string) (string, string, chan error) {
	t.Helper()
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	args = append([]string{"--secure-serving=false"}, args...)
	args = append(args, "--listen-host", "127.0.0.1", "--grpc-port", "0", "--grpc-health-port", "0", "--metrics-port", "0", "--drain-timeout=0")
	go func() {
		done <- run(ctx, args, pw, logs)
		pw.Close()
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	require.NoError(t, err)
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	m := regexp.MustCompile(`health on (\S+),.*readiness (\S+)\)`).FindStringSubmatch(line)
	require.Len(t, m, 3, line)
	return m[1], m[2], done
}
