package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/kvroute/kvroute/internal/leakcheck"
)

// h2Client is a bare HTTP/2 client connection to one of the picker's gRPC
// servers: it sees every frame the server sends (SETTINGS, RST_STREAM,
// GOAWAY, PING acknowledgements), which a gRPC client hides.
type h2Client struct {
	conn     net.Conn
	fr       *http2.Framer
	settings map[http2.SettingID]uint32 // the server's initial SETTINGS
}

// dialH2 connects to addr, exchanges the connection prefaces and returns the
// server's initial settings. Every read fails after 30 s, so that a frame
// the server never sends fails the test instead of hanging it.
func dialH2(t *testing.T, addr string) *h2Client {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	require.NoError(t, conn.SetDeadline(time.Now().Add(30*time.Second)))
	_, err = io.WriteString(conn, http2.ClientPreface)
	require.NoError(t, err)
	c := &h2Client{conn: conn, fr: http2.NewFramer(conn, conn), settings: map[http2.SettingID]uint32{}}
	require.NoError(t, c.fr.WriteSettings())
	f, err := c.fr.ReadFrame()
	require.NoError(t, err)
	sf, ok := f.(*http2.SettingsFrame)
	require.True(t, ok, "the server's first frame is %v, not SETTINGS", f)
	require.NoError(t, sf.ForeachSetting(func(s http2.Setting) error { c.settings[s.ID] = s.Val; return nil }))
	require.NoError(t, c.fr.WriteSettingsAck())
	return c
}

// openProcess opens stream id as Envoy's ext_proc filter does, without
// sending a message yet.
func (c *h2Client) openProcess(t *testing.T, id uint32) {
	t.Helper()
	var block bytes.Buffer
	enc := hpack.NewEncoder(&block)
	for _, h := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":authority", "kvroute-epp"},
		{":path", "/envoy.service.ext_proc.v3.ExternalProcessor/Process"}, {"content-type", "application/grpc"}, {"te", "trailers"}} {
		require.NoError(t, enc.WriteField(hpack.HeaderField{Name: h[0], Value: h[1]}))
	}
	require.NoError(t, c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block.Bytes(), EndHeaders: true}))
}

// startEPPWith runs the picker with a static endpoint and extra flags and
// stops it when the test ends.
func startEPPWith(t *testing.T, args ...string) []string {
	t.Helper()
	cfgPath := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(cfgPath, []byte("model: "+model+"\nblockSize: 16\nevents:\n  enabled: false\n"), 0o600))
	ctx, cancel := context.WithCancel(context.Background())
	m, done := startEPP(t, ctx, append([]string{"--endpoints", "127.0.0.1:1", "--config", cfgPath}, args...)...)
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	return m
}

// --grpc-max-concurrent-streams is announced in the servers' SETTINGS, and a
// stream over it is refused (REFUSED_STREAM, which HTTP/2 clients retry on
// another connection) while the streams within it stay open.
func TestGRPCServersLimitConcurrentStreams(t *testing.T) {
	t.Cleanup(leakcheck.Check(t)) // after the picker and the connections, which Cleanup stops first
	m := startEPPWith(t, "--grpc-max-concurrent-streams", "2")
	c := dialH2(t, m[1])
	require.EqualValues(t, 2, c.settings[http2.SettingMaxConcurrentStreams])
	for _, id := range []uint32{1, 3, 5} {
		c.openProcess(t, id)
	}
	for {
		f, err := c.fr.ReadFrame()
		require.NoError(t, err, "no RST_STREAM for the stream over the limit")
		switch f := f.(type) {
		case *http2.RSTStreamFrame:
			require.EqualValues(t, 5, f.StreamID, "a stream within the limit was reset")
			require.Equal(t, http2.ErrCodeRefusedStream, f.ErrCode)
			return
		case *http2.GoAwayFrame:
			t.Fatalf("GOAWAY %v", f.ErrCode)
		}
	}
}

// Without --grpc-max-concurrent-streams the servers announce no limit, as
// grpc-go's default.
func TestGRPCServersAnnounceNoStreamLimitByDefault(t *testing.T) {
	t.Cleanup(leakcheck.Check(t)) // after the picker and the connections, which Cleanup stops first
	m := startEPPWith(t)
	for _, addr := range []string{m[1], m[2]} {
		_, limited := dialH2(t, addr).settings[http2.SettingMaxConcurrentStreams]
		require.False(t, limited, addr)
	}
}

// A connection with no stream open is closed, with a graceful GOAWAY, after
// --grpc-max-connection-idle, on both gRPC servers.
func TestGRPCServersCloseIdleConnections(t *testing.T) {
	t.Cleanup(leakcheck.Check(t)) // after the picker and the connections, which Cleanup stops first
	m := startEPPWith(t, "--grpc-max-connection-idle", "50ms")
	for _, addr := range []string{m[1], m[2]} {
		c := dialH2(t, addr)
		for {
			f, err := c.fr.ReadFrame()
			require.NoError(t, err, "%s: the idle connection was not sent GOAWAY", addr)
			if g, ok := f.(*http2.GoAwayFrame); ok {
				require.Equal(t, http2.ErrCodeNo, g.ErrCode, addr)
				require.Equal(t, "max_idle", string(g.DebugData()), addr)
				break
			}
		}
	}
}

// pingN sends n PINGs on a connection with no stream open, as Envoy's
// connection_keepalive does between requests, and reads until all are
// acknowledged; it returns the GOAWAY the server sent instead, if any.
func (c *h2Client) pingN(t *testing.T, n int) *http2.GoAwayFrame {
	t.Helper()
	for i := range n {
		require.NoError(t, c.fr.WritePing(false, [8]byte{byte(i)}))
	}
	for acks := 0; acks < n; {
		f, err := c.fr.ReadFrame()
		require.NoError(t, err)
		switch f := f.(type) {
		case *http2.PingFrame:
			if f.IsAck() {
				acks++
			}
		case *http2.GoAwayFrame:
			return f
		}
	}
	return nil
}

// Keepalive pings on a connection with no stream open are accepted as long
// as they are at least --grpc-keepalive-min-time apart (grpc-go's default
// refuses them whenever no stream is open); a client pinging faster is sent
// GOAWAY too_many_pings.
func TestGRPCServersKeepalivePolicy(t *testing.T) {
	t.Cleanup(leakcheck.Check(t)) // after the picker and the connections, which Cleanup stops first
	m := startEPPWith(t, "--grpc-keepalive-min-time", "1ns")
	for _, addr := range []string{m[1], m[2]} {
		require.Nil(t, dialH2(t, addr).pingN(t, 5), addr)
	}

	m = startEPPWith(t, "--grpc-keepalive-min-time", "1h")
	g := dialH2(t, m[1]).pingN(t, 5)
	require.NotNil(t, g, "pings an hour apart were not enforced")
	require.Equal(t, http2.ErrCodeEnhanceYourCalm, g.ErrCode)
	require.Equal(t, "too_many_pings", string(g.DebugData()))
}

// The gRPC server flags are checked when they are parsed.
func TestGRPCServerFlags(t *testing.T) {
	f, err := parseFlags([]string{"--endpoints", "127.0.0.1:8000"}, io.Discard)
	require.NoError(t, err)
	require.Zero(t, f.grpcMaxConcurrentStreams)
	require.Equal(t, defaultGRPCKeepaliveMinTime, f.grpcKeepaliveMinTime)
	require.Equal(t, defaultGRPCMaxConnectionIdle, f.grpcMaxConnectionIdle)
	for _, c := range []struct{ flag, value, want string }{
		{"--grpc-max-concurrent-streams", "-1", "grpc-max-concurrent-streams"},
		{"--grpc-max-concurrent-streams", "4294967296", "grpc-max-concurrent-streams"},
		{"--grpc-keepalive-min-time", "0s", "--grpc-keepalive-min-time 0s is not positive"},
		{"--grpc-max-connection-idle", "-1s", "--grpc-max-connection-idle -1s is negative"},
	} {
		_, err := parseFlags([]string{"--endpoints", "127.0.0.1:8000", c.flag, c.value}, io.Discard)
		require.ErrorContains(t, err, c.want, c.flag+" "+c.value)
	}
}
