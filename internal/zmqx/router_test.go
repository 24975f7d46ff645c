package zmqx

import (
	"errors"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/telemetry"
)

// TestServeRouterCountsWhatEndsAConnection: a ROUTER server with one
// connection slot echoes its messages (skipping nothing but commands);
// a peer that fails its handshake is counted, a second connection is
// rejected and counted, a silent connection is closed as idle and counted,
// a handler error closes the connection, every handler's Done runs once,
// and Close leaves no goroutine.
func TestServeRouterCountsWhatEndsAConnection(t *testing.T) {
	defer leakcheck.Check(t)()
	var counts ServerCounts
	var opened, done atomic.Int32
	s, err := ServeRouter(RouterConfig{Addr: "127.0.0.1:0", MaxConns: 1, Name: "echo",
		Options: Options{IdleTimeout: 2 * time.Second}}, &counts, nil,
		func(c *Conn) ConnHandler {
			opened.Add(1)
			return ConnHandler{Done: func() { done.Add(1) }, Message: func(frames [][]byte) error {
				if string(frames[len(frames)-1]) == "quit" {
					return errors.New("quit")
				}
				return c.WriteMsg(frames...)
			}}
		})
	require.NoError(t, err)
	defer s.Close()

	bad := dialRaw(t, s.Addr().String()) // not a ZMTP peer
	defer bad.Close()
	_, err = bad.Write([]byte("GET / HTTP/1.1\r\n\r\n"))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return counts.Handshakes.Load() == 1 }, 10*time.Second, time.Millisecond)

	a := echoPeer(t, s.l)
	defer a.Close()
	_, err = a.Write(zmtpMessage([]byte("hello")))
	require.NoError(t, err)
	_, body, err := readFrame(a)
	require.NoError(t, err)
	require.Equal(t, "hello", string(body))

	extra := echoPeer(t, s.l) // beyond MaxConns
	defer extra.Close()
	_, _, err = readFrame(extra)
	require.ErrorIs(t, err, io.EOF)
	require.EqualValues(t, 1, counts.Rejected.Load())

	_, err = a.Write(zmtpMessage([]byte("quit"))) // the handler's error closes it
	require.NoError(t, err)
	_, _, err = readFrame(a)
	require.ErrorIs(t, err, io.EOF)
	require.Eventually(t, func() bool { return s.Open() == 0 }, 10*time.Second, time.Millisecond)

	idle := echoPeer(t, s.l) // silent: closed after the idle timeout
	defer idle.Close()
	_, _, err = readFrame(idle)
	require.ErrorIs(t, err, io.EOF)
	require.EqualValues(t, 1, counts.Idle.Load())

	require.NoError(t, s.Close())
	require.EqualValues(t, 2, opened.Load())
	require.EqualValues(t, 2, done.Load(), "Done once per served connection")
	require.NoError(t, s.Close(), "idempotent")
}

// TestServeRouterRegistersCountersWhileServing: ServeRouter registers the
// server's counters before it binds and Close unregisters them (once), so
// a closed server can be built again on the same registry; a server whose
// counters another holds fails with the registration error, and one that
// cannot bind leaves nothing registered.
func TestServeRouterRegistersCountersWhileServing(t *testing.T) {
	defer leakcheck.Check(t)()
	reg := prometheus.NewRegistry()
	var counts ServerCounts
	cfg := RouterConfig{Addr: "127.0.0.1:0", MaxConns: 1, Name: "echo", Metrics: telemetry.Set{Registerer: reg},
		Counters: []telemetry.Counter{{Name: "echo_rejected_connections_total", Help: "Rejected.", Value: &counts.Rejected}}}
	handler := func(*Conn) ConnHandler { return ConnHandler{Message: func([][]byte) error { return nil }} }
	s, err := ServeRouter(cfg, &counts, nil, handler)
	require.NoError(t, err)
	counts.Rejected.Add(2)
	require.Len(t, s.Collectors(), 1)
	require.Equal(t, 2.0, testutil.ToFloat64(s.Collectors()[0]))

	_, err = ServeRouter(cfg, &counts, nil, handler)
	require.ErrorContains(t, err, "echo: registering server metrics")

	other := prometheus.NewRegistry()
	busy := cfg
	busy.Addr, busy.Metrics = s.Addr().String(), telemetry.Set{Registerer: other}
	_, err = ServeRouter(busy, &counts, nil, handler)
	require.Error(t, err, "the address is taken")
	n, err := testutil.GatherAndCount(other)
	require.NoError(t, err)
	require.Zero(t, n, "a server that could not bind leaves no metric registered")

	require.NoError(t, s.Close())
	require.NoError(t, s.Close(), "idempotent")
	n, err = testutil.GatherAndCount(reg)
	require.NoError(t, err)
	require.Zero(t, n, "Close unregisters the server's metrics")
	s, err = ServeRouter(cfg, &counts, nil, handler)
	require.NoError(t, err, "a closed server can be built again on the same registry")
	require.NoError(t, s.Close())
}
