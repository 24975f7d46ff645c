package gatewaycmd

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/gateway"
	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/telemetry"
)

// After SIGTERM with --drain-timeout, /ready turns 503 "shutting down" at
// once while requests are still served (each on a connection closed after
// its response, so a client reconnects to another replica), and Run stops
// at the end of the window.
func TestRunDrainsBeforeShutdown(t *testing.T) {
	defer leakcheck.Check(t)()
	clock := manualDrainClock(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	g := startRun(t, ctx, "--drain-timeout", "1h")
	defer g.close()

	ready := func() (int, string) {
		resp, err := g.client.Get(g.url + "/ready")
		require.NoError(t, err)
		defer resp.Body.Close()
		var body struct {
			Reason string `json:"reason"`
		}
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
		return resp.StatusCode, body.Reason
	}
	code, _ := ready()
	require.Equal(t, http.StatusOK, code)
	resp, _ := g.complete(t)
	require.False(t, resp.Close, "keep-alive before the drain")

	cancel() // SIGTERM
	require.Eventually(t, func() bool {
		code, reason := ready()
		return code == http.StatusServiceUnavailable && reason == gateway.ReasonShuttingDown
	}, 10*time.Second, 5*time.Millisecond, "/ready reports the drain")
	status, err := g.client.Get(g.url + gateway.StatusPath)
	require.NoError(t, err)
	page, err := io.ReadAll(status.Body)
	status.Body.Close()
	require.NoError(t, err)
	require.Contains(t, string(page), `<b id="ready">false</b> — `+gateway.ReasonShuttingDown, "the status page says so too")
	resp, body := g.complete(t)
	require.Equal(t, http.StatusOK, resp.StatusCode, "a request sent during the drain window is served")
	require.Equal(t, `{"choices":[{"text":"ok"}]}`, string(body))
	require.True(t, resp.Close, "the connection is closed after the response")
	select {
	case err := <-g.done:
		t.Fatalf("run returned before the drain window ended: %v", err)
	default:
	}

	clock.WaitForWaiters(1)
	clock.Advance(time.Hour)
	select {
	case err := <-g.done:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("run did not stop at the end of the drain window")
	}
	_, err = parseFlags([]string{"--endpoints", "127.0.0.1:1", "--model", "m", "--drain-timeout", "-1s"}, io.Discard, io.Discard)
	require.ErrorContains(t, err, "--drain-timeout must be >= 0")
	o, err := parseFlags([]string{"--endpoints", "127.0.0.1:1", "--model", "m"}, io.Discard, io.Discard)
	require.NoError(t, err)
	require.Zero(t, o.drainTimeout, "no drain window unless asked for")
}

// A listener that fails during the drain window ends it: Run shuts down and
// returns the failure without waiting the window out.
func TestRunDrainWindowEndsWhenAListenerFails(t *testing.T) {
	defer leakcheck.Check(t)()
	clock := manualDrainClock(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	snap, done := runWithSnapshot(t, ctx, io.Discard, "--drain-timeout", "1h")
	cancel() // SIGTERM
	clock.WaitForWaiters(1)
	failSnapshot(t, snap, done, "the drain window went on after the snapshot listener failed")
}

// manualDrainClock makes drainClock a Manual clock for the test.
func manualDrainClock(t *testing.T) *telemetry.Manual {
	clock := telemetry.NewManual(time.Unix(1e9, 0))
	old := drainClock
	drainClock = clock
	t.Cleanup(func() { drainClock = old })
	return clock
}
