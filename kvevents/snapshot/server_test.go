package snapshot

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/internal/zmqx"
	"github.com/kvroute/kvroute/telemetry"
)

// A connection beyond MaxConns is closed at once and counted, in Stats
// and as a metric, and so is one whose handshake fails; the counters are registered through the Options' Set,
// a second server on the same registry is a constructor error, and Close
// unregisters them.
func TestServerCountsRejectedConnections(t *testing.T) {
	defer leakcheck.Check(t)()
	reg := prometheus.NewRegistry()
	set := telemetry.Set{Registerer: reg}
	s, err := NewServer(ServerConfig{Addr: "tcp://127.0.0.1:0", PublisherID: testID, MaxConns: 1},
		SourceFunc(func() (int64, [][]byte, bool) { return 1, [][]byte{[]byte("c")}, true }), Options{Set: set})
	require.NoError(t, err)
	_, err = NewServer(ServerConfig{Addr: "tcp://127.0.0.1:0"}, SourceFunc(func() (int64, [][]byte, bool) { return 0, nil, false }), Options{Set: set})
	require.ErrorContains(t, err, "registering server metrics")

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var socks []zmq4.Socket
	for range 2 {
		d := zmqx.NewDealer(ctx, zmqx.Options{IdleTimeout: time.Minute}, nil)
		require.NoError(t, zmqx.Dial(d, s.Endpoint()))
		socks = append(socks, d)
	}
	require.Eventually(t, func() bool { return s.Stats().Rejected == 1 }, time.Minute, time.Millisecond)
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP kvroute_snapshot_server_rejected_connections_total Snapshot connections closed because the connection limit was reached.
# TYPE kvroute_snapshot_server_rejected_connections_total counter
kvroute_snapshot_server_rejected_connections_total 1
`), "kvroute_snapshot_server_rejected_connections_total"))

	// A peer that is no ZMTP client at all fails its handshake: dropped
	// and counted.
	bad, err := net.Dial("tcp", strings.TrimPrefix(s.Endpoint(), "tcp://"))
	require.NoError(t, err)
	_, err = bad.Write([]byte("GET / HTTP/1.1\r\n\r\n" + strings.Repeat("x", 64)))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return s.Stats().Handshakes == 1 }, time.Minute, time.Millisecond)
	_ = bad.Close()
	require.Equal(t, 1.0, testutil.ToFloat64(s.collectors[4]))

	for _, d := range socks {
		require.NoError(t, d.Close())
	}
	require.NoError(t, s.Close())
	n, err := testutil.GatherAndCount(reg)
	require.NoError(t, err)
	require.Zero(t, n, "Close unregisters the server's metrics")
}

// A ServerConfig with a negative setting is rejected, by Validate and by
// NewServer, as ClientConfig's and the replay server's are: zero means the
// default, a negative value is a mistake, not the default.
func TestServerConfigRejectsNegativeSettings(t *testing.T) {
	defer leakcheck.Check(t)()
	src := SourceFunc(func() (int64, [][]byte, bool) { return 0, nil, false })
	for _, c := range []ServerConfig{{MaxConns: -1}, {WriteTimeout: -time.Second}, {IdleTimeout: -time.Second}} {
		c.Addr = "tcp://127.0.0.1:0"
		require.Error(t, c.Validate(), "%+v", c)
		s, err := NewServer(c, src, Options{})
		if err == nil {
			_ = s.Close()
		}
		require.Error(t, err, "%+v", c)
	}
	require.NoError(t, ServerConfig{}.Validate(), "the zero value takes every default")
}
