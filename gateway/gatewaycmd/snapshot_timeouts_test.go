package gatewaycmd

import (
	"bufio"
	"context"
	"io"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/gateway"
	"github.com/kvroute/kvroute/internal/leakcheck"
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
