package checkpoint

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/telemetry"
)

// slowPeer asks srv for a snapshot over a connection with small socket
// buffers, reads its first KiB, lets pass the time the peer is slow for
// (advance), then reads the rest and returns the bytes it got in all. The
// handler writes 256 KiB at a time, far more than the socket buffers hold:
// the write the first KiB came from is still waiting for the peer during
// advance.
func slowPeer(t *testing.T, srv *httptest.Server, advance func()) int64 {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.(*net.TCPConn).SetReadBuffer(32<<10))   // with the server's: far below a 256 KiB write
	require.NoError(t, c.SetDeadline(time.Now().Add(stallWait))) // a bound on a broken test only
	_, err = io.WriteString(c, "GET / HTTP/1.1\r\nHost: peer\r\nConnection: close\r\n\r\n")
	require.NoError(t, err)
	br := bufio.NewReaderSize(c, 1024)
	first, err := io.ReadFull(br, make([]byte, 1024))
	require.NoError(t, err)
	advance()
	rest, _ := io.Copy(io.Discard, br) // to the server's close, complete or cut
	return int64(first) + rest
}

// A peer that reads a little within every write timeout restarted the
// per-write deadline forever and held its serving slot as long as it
// liked. A serve must now have sent its first n bytes within
// ServeWriteTimeout plus n at ServeMinRate, on the Keeper's clock: a peer
// slow within that allowance gets its whole snapshot, one slower is cut,
// counted as too_slow, and its slot is free for the next peer.
func TestHandlerCutsPeersBelowTheFloorRate(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	clk := telemetry.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	k, err := Restore(t.Context(), newIndex(t, testBlockSize), Config{}, BootstrapConfig{ServeWriteTimeout: stallWait},
		Options{Set: telemetry.Set{Clock: clk, Logger: testLogger(t)}})
	require.NoError(t, err)
	k.Start()
	t.Cleanup(k.Close)
	for i := range 128 { // a snapshot of over 512 KiB: far beyond the socket buffers
		storeBlocks(t, k.ix, "10.0.0.1:8000", 100+i, 256, "peer-pos")
	}
	srv := httptest.NewUnstartedServer(k.Handler())
	srv.Listener = smallSendBuffers{srv.Listener}
	srv.Start()
	t.Cleanup(srv.Close)
	serves := func(result string) float64 { return testutil.ToFloat64(k.met.serves.WithLabelValues(result)) }

	// Slow, but within the grace: served whole.
	whole := slowPeer(t, srv, func() { clk.Advance(stallWait - time.Second) })
	require.Equal(t, 1.0, serves("ok"))
	require.Greater(t, whole, int64(512<<10))

	// An hour for the first KiB of a snapshot that is due in well under
	// a minute at DefaultServeMinRate.
	cut := slowPeer(t, srv, func() { clk.Advance(time.Hour) })
	require.Equal(t, 1.0, serves("too_slow"), "a peer reading below the floor rate was served")
	require.Equal(t, 1.0, serves("ok"))
	require.Zero(t, serves("stalled"))
	require.Zero(t, serves("error"))
	require.Less(t, cut, whole, "the cut peer got part of the snapshot only")
	require.Empty(t, k.serving, "the cut serve gave its slot back")

	// The floor restarts with every serve.
	resp, err := http.Get(srv.URL)
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	require.Equal(t, 2.0, serves("ok"))
	http.DefaultClient.CloseIdleConnections()
}
