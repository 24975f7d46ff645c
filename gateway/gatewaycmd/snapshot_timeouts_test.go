package gatewaycmd

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/gateway"
	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/internal/syncbuf"
)

// The internal snapshot listener applies the gateway's readHeaderTimeout
// (and idleTimeout), as the public listener does, not the defaults: a peer
// whose request header is late has its connection closed after the
// configured time. Before, the listener always used
// gateway.DefaultReadHeaderTimeout whatever the gateway section said.
func TestSnapshotListenerUsesTheGatewayTimeouts(t *testing.T) {
	defer leakcheck.Check(t)()
	cfg := writeFile(t, "router.yaml",
		"events: {enabled: false}\ndisableRender: true\ngateway:\n  readHeaderTimeout: 200ms\n  idleTimeout: 90s\n")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	started := make(chan *snapshotServer, 1)
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"--listen", "127.0.0.1:0", "--endpoints", "127.0.0.1:1", "--model", "m", "--config", cfg,
			"--snapshot-listen", "127.0.0.1:0", "--peer-token", "tok"}, io.Discard, io.Discard, Options{},
			func(s *snapshotServer) { started <- s })
	}()
	var snap *snapshotServer
	select {
	case snap = <-started:
	case err := <-done:
		t.Fatalf("run returned before serving: %v", err)
	}
	require.Equal(t, 200*time.Millisecond, snap.srv.ReadHeaderTimeout)
	require.Equal(t, 90*time.Second, snap.srv.IdleTimeout)

	// A header that never ends: the connection is closed after 200 ms; the
	// deadline only guards against a hang.
	c, err := net.Dial("tcp", snap.addr)
	require.NoError(t, err)
	defer c.Close()
	_, err = io.WriteString(c, "GET /kvroute/snapshot HTTP/1.1\r\nHost: x\r\n")
	require.NoError(t, err)
	require.NoError(t, c.SetReadDeadline(time.Now().Add(30*time.Second)))
	_, err = bufio.NewReader(c).ReadByte()
	require.ErrorIs(t, err, io.EOF, "the connection with a late header was not closed")

	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("run did not return after cancellation")
	}
}

// Without a gateway section the snapshot listener takes the gateway's
// defaults, as the public listener does.
func TestSnapshotListenerDefaultTimeouts(t *testing.T) {
	defer leakcheck.Check(t)()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	snap, done := runWithSnapshot(t, ctx, io.Discard)
	require.Equal(t, gateway.DefaultReadHeaderTimeout, snap.srv.ReadHeaderTimeout)
	require.Equal(t, gateway.DefaultIdleTimeout, snap.srv.IdleTimeout)
	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("run did not return after cancellation")
	}
}

// The snapshot listener counts, as the public listener does, a peer
// connection closed because its request header came late
// (kvroute_gateway_snapshot_header_timeouts_total) and a request net/http
// refused unread (kvroute_gateway_snapshot_refused_requests_total), both
// served on the gateway's /metrics. Before, the listener closed and
// refused them without a trace.
func TestSnapshotListenerCountsHeaderTimeoutsAndRefusals(t *testing.T) {
	defer leakcheck.Check(t)()
	cfg := writeFile(t, "router.yaml",
		"events: {enabled: false}\ndisableRender: true\ngateway:\n  readHeaderTimeout: 200ms\n")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	started := make(chan *snapshotServer, 1)
	done := make(chan error, 1)
	stdout := new(syncbuf.Buffer)
	go func() {
		done <- run(ctx, []string{"--listen", "127.0.0.1:0", "--endpoints", "127.0.0.1:1", "--model", "m", "--config", cfg,
			"--snapshot-listen", "127.0.0.1:0", "--peer-token", "tok"}, stdout, io.Discard, Options{},
			func(s *snapshotServer) { started <- s })
	}()
	var snap *snapshotServer
	select {
	case snap = <-started:
	case err := <-done:
		t.Fatalf("run returned before serving: %v", err)
	}
	// The public listener's URL, printed before the snapshot listener starts.
	m := regexp.MustCompile(`serving on (http://\S+)`).FindStringSubmatch(stdout.String())
	require.NotNil(t, m, stdout.String())
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	metric := func(name string) string {
		t.Helper()
		resp, err := client.Get(m[1] + "/metrics")
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, name+" "); ok {
				return v
			}
		}
		t.Fatalf("%s not served", name)
		return ""
	}
	require.Equal(t, "0", metric("kvroute_gateway_snapshot_header_timeouts_total"))
	require.Equal(t, "0", metric("kvroute_gateway_snapshot_refused_requests_total"))

	// A header that never ends: closed after 200 ms (the read deadline only
	// guards against a hang), counted before the close.
	c, err := net.Dial("tcp", snap.addr)
	require.NoError(t, err)
	defer c.Close()
	_, err = io.WriteString(c, "GET /kvroute/snapshot HTTP/1.1\r\nHost: x\r\n")
	require.NoError(t, err)
	require.NoError(t, c.SetReadDeadline(time.Now().Add(30*time.Second)))
	_, err = bufio.NewReader(c).ReadByte()
	require.ErrorIs(t, err, io.EOF)
	require.Equal(t, "1", metric("kvroute_gateway_snapshot_header_timeouts_total"))

	// A malformed request line: net/http answers 400 itself, counted as it
	// writes the answer.
	c2, err := net.Dial("tcp", snap.addr)
	require.NoError(t, err)
	defer c2.Close()
	_, err = io.WriteString(c2, "NOT HTTP\r\n\r\n")
	require.NoError(t, err)
	require.NoError(t, c2.SetReadDeadline(time.Now().Add(30*time.Second)))
	resp, err := http.ReadResponse(bufio.NewReader(c2), nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, "1", metric("kvroute_gateway_snapshot_refused_requests_total"))
	require.Equal(t, "1", metric("kvroute_gateway_snapshot_header_timeouts_total"), "a refusal is no timeout")

	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("run did not return after cancellation")
	}
}
