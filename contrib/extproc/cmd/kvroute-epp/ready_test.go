package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/kvroute/kvroute/contrib/extproc"
	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/internal/testport"
	"github.com/kvroute/kvroute/simengine"
	"github.com/kvroute/kvroute/simengine/server"
)

// The binary is not ready while its engine's KV-event stream has not caught
// up (here: the engine's publisher is not up yet, so the stream connects and
// reconnects), and turns ready once the router is: the engine starts
// publishing where the configuration says, the router subscribes and
// replays, and the readiness service reports serving. Liveness never waits.
func TestRunIsNotReadyUntilTheIndexHasCaughtUp(t *testing.T) {
	defer leakcheck.Check(t)()
	httpLn, err := net.Listen("tcp", "127.0.0.1:0") // the engine's HTTP port, served once it starts
	require.NoError(t, err)
	id := httpLn.Addr().String()
	eventsPort, replayPort := testport.Port(t), testport.Port(t) // bound later, by the engine

	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "config.yaml")
	require.NoError(t, os.WriteFile(cfgPath, []byte(fmt.Sprintf(
		"model: %s\nblockSize: 16\nevents:\n  eventsPort: %d\n  replayPort: %d\n  minBackoff: 10ms\n  maxBackoff: 200ms\n",
		model, eventsPort, replayPort)), 0o600))

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	m, done := startEPP(t, ctx, "--endpoints", id, "--config", cfgPath, "--readiness-interval", "10ms")

	hconn, err := grpc.NewClient(m[2], grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer hconn.Close()
	hc := healthpb.NewHealthClient(hconn)
	check := func(svc string) healthpb.HealthCheckResponse_ServingStatus {
		resp, err := hc.Check(ctx, &healthpb.HealthCheckRequest{Service: svc})
		require.NoError(t, err)
		return resp.GetStatus()
	}
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	metrics := func() string {
		resp, err := client.Get(m[3])
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return string(b)
	}
	stateIs := func(state string) func() bool {
		return func() bool {
			return strings.Contains(metrics(),
				fmt.Sprintf(`kvroute_kv_events_stream_state{pod_identifier=%q,state=%q} 1`, id, state))
		}
	}

	base := strings.TrimSuffix(m[3], "/metrics")
	get := func(path string) (int, string) {
		resp, err := client.Get(base + path)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(b)
	}

	// The router subscribed and is still connecting: not ready, alive; the
	// HTTP readiness and the status page say so and why.
	require.Eventually(t, stateIs("connecting"), 20*time.Second, 10*time.Millisecond)
	require.Equal(t, healthpb.HealthCheckResponse_SERVING, check(extproc.LivenessService))
	for _, svc := range []string{extproc.ReadinessService, extproc.ExtProcService} {
		require.Equal(t, healthpb.HealthCheckResponse_NOT_SERVING, check(svc), svc)
	}
	code, body := get(extproc.ReadyPath)
	require.Equal(t, http.StatusServiceUnavailable, code, body)
	require.Contains(t, body, `"ready":false`)
	require.Contains(t, body, id, "the reason names the endpoint it waits for")
	code, body = get(extproc.StatusPath)
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, `<b id="ready">false</b>`)
	require.Contains(t, body, `data-id="`+id+`"`)

	replay := fmt.Sprintf("tcp://127.0.0.1:%d", replayPort)
	eng, err := server.New(server.Config{Model: model, EnableScaleOut: true,
		Engine: simengine.Config{BlockSize: 16, NumGPUBlocks: 256, PrefillTokensPerSecond: 1e6, DecodeStep: time.Millisecond},
		KVEvents: server.KVEventsConfig{EnableKVCacheEvents: true, Publisher: "zmq",
			Endpoint: fmt.Sprintf("tcp://127.0.0.1:%d", eventsPort), ReplayEndpoint: &replay, Topic: "kv@" + id + "@" + model},
	}, server.Options{})
	require.NoError(t, err)
	served := make(chan error, 1)
	go func() { served <- eng.Serve(httpLn) }()
	defer func() { _ = eng.Close(); <-served }()

	require.Eventually(t, func() bool {
		return check(extproc.ReadinessService) == healthpb.HealthCheckResponse_SERVING
	}, 20*time.Second, 10*time.Millisecond, "ready once the engine's stream caught up")
	require.Equal(t, healthpb.HealthCheckResponse_SERVING, check(extproc.ExtProcService))
	require.True(t, stateIs("live")(), "ready means the router's index is live")
	code, body = get(extproc.ReadyPath)
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, body, `"state":"live"`)
	code, body = get(extproc.StatusPath)
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, `<b id="ready">true</b>`)
	require.Contains(t, body, `class="live"`)

	cancel()
	waitRun(t, done)
}

func TestReadinessIntervalMustBePositive(t *testing.T) {
	for _, v := range []string{"0s", "-1s"} {
		_, err := parseFlags([]string{"--endpoints", "127.0.0.1:8000", "--readiness-interval", v}, io.Discard)
		require.ErrorContains(t, err, "--readiness-interval", v)
	}
	f, err := parseFlags([]string{"--endpoints", "127.0.0.1:8000"}, io.Discard)
	require.NoError(t, err)
	require.Equal(t, extproc.DefaultReadinessInterval, f.readinessInterval)
}
