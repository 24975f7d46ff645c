package checkpoint

import (
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
)

// stallWait bounds each wait for an event in the stall test: generous, the
// awaited event ends it.
const stallWait = 30 * time.Second

// smallSendBuffers is a listener whose connections have a small send
// buffer, so that a peer that reads nothing blocks the server's writes
// after a few KiB rather than after the kernel's megabytes.
type smallSendBuffers struct{ net.Listener }

func (l smallSendBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(4096)
	}
	return c, err
}

// Peers that ask for a snapshot and then never read held every serving
// slot for as long as they kept their connections, and every bootstrapping
// peer was answered 503. Each write of a served snapshot now waits at most
// ServeWriteTimeout: the stalled peers are cut off, counted as stalled,
// and a peer that reads gets its snapshot.
func TestHandlerCutsPeersThatStopReading(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	// 2 s per write: the stalled peers are cut after it, and the reading
	// peer below, a goroutine of this process that a loaded machine under
	// -race can deschedule for longer than 200 ms, is not.
	k := started(t, testBlockSize, Config{}, BootstrapConfig{ServeWriteTimeout: 2 * time.Second}, nil)
	for i := range 128 { // a snapshot of over 512 KiB: far beyond the socket buffers
		storeBlocks(t, k.ix, "10.0.0.1:8000", 100+i, 256, "peer-pos")
	}
	srv := httptest.NewUnstartedServer(k.Handler())
	srv.Listener = smallSendBuffers{srv.Listener}
	srv.Start()
	t.Cleanup(srv.Close)

	for range maxConcurrentServes {
		c, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close() })
		require.NoError(t, c.(*net.TCPConn).SetReadBuffer(4096)) // the window fills at once
		_, err = io.WriteString(c, "GET / HTTP/1.1\r\nHost: peer\r\n\r\n")
		require.NoError(t, err)
		// The peer reads nothing from here on.
	}

	stalled := k.met.serves.WithLabelValues("stalled")
	require.Eventually(t, func() bool { return testutil.ToFloat64(stalled) == maxConcurrentServes }, stallWait, time.Millisecond,
		"the peers that stopped reading were never cut off")
	require.Eventually(t, func() bool { return len(k.serving) == 0 }, stallWait, time.Millisecond)
	require.Zero(t, testutil.ToFloat64(k.met.serves.WithLabelValues("error")))

	// The slots are the reading peers' again.
	resp, err := http.Get(srv.URL)
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	require.Equal(t, SnapshotContentType, resp.Header.Get("Content-Type"))
	require.Greater(t, len(body), 512<<10)
	require.Equal(t, 1.0, testutil.ToFloat64(k.met.serves.WithLabelValues("ok")))
	http.DefaultClient.CloseIdleConnections()
}
