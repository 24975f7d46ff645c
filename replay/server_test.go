package replay

import (
	"context"
	"encoding/hex"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/internal/zmqx"
	"github.com/kvroute/kvroute/telemetry"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
)

// dealer dials the server with a go-zeromq DEALER through the guarded transport.
func dealer(t testing.TB, ep string) zmq4.Socket {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	d := zmqx.NewDealer(ctx, zmqx.Options{IdleTimeout: 5 * time.Second}, nil)
	require.NoError(t, zmqx.Dial(d, ep))
	return d
}

func hexFrames(m zmq4.Msg) []string {
	var out []string
	for _, f := range m.Frames {
		out = append(out, hex.EncodeToString(f))
	}
	return out
}

func TestServerWireVectors(t *testing.T) {
	defer leakcheck.Check(t)()
	// The frames of both reply layouts, as the DEALER sees them.
	const topic = "6b764031302e302e302e31406d" // kv@10.0.0.1@m
	for _, tc := range []struct {
		layout     Layout
		batch, end []string
	}{
		{LayoutCurrent, []string{"", topic, "0000000000000001", "7061796c6f6164"}, []string{"", "", "ffffffffffffffff", ""}},
		{LayoutLegacy, []string{"", "0000000000000001", "7061796c6f6164"}, []string{"", "ffffffffffffffff", ""}},
	} {
		buf := NewBuffer(4)
		buf.Add(1, []byte("kv@10.0.0.1@m"), []byte("payload"))
		srv, err := NewServer(ServerConfig{Addr: "127.0.0.1:0", Layout: tc.layout}, buf, Options{})
		require.NoError(t, err)
		d := dealer(t, srv.Endpoint())
		req := RequestFrames(1)
		require.Equal(t, []string{"", "0000000000000001"}, hexFrames(zmq4.NewMsgFrom(req...)))
		require.NoError(t, d.Send(zmq4.NewMsgFrom(req...)))
		m, err := d.Recv()
		require.NoError(t, err)
		require.Equal(t, tc.batch, hexFrames(m))
		m, err = d.Recv()
		require.NoError(t, err)
		require.Equal(t, tc.end, hexFrames(m))
		require.NoError(t, zmqx.CloseDrain(d))
		require.NoError(t, srv.Close())
	}
}

func TestServerIgnoresAndCountsInvalidRequests(t *testing.T) {
	defer leakcheck.Check(t)()
	reg := prometheus.NewRegistry()
	srv, err := NewServer(ServerConfig{Addr: "127.0.0.1:0"}, filledBuffer(0, 0, 3), Options{Set: telemetry.Set{Registerer: reg}})
	require.NoError(t, err)
	defer srv.Close()
	d := dealer(t, srv.Endpoint())
	defer zmqx.CloseDrain(d)

	// [start] without the delimiter reaches a ROUTER as 2 frames and vLLM
	// ignores it; so are 3-frame requests. Neither gets a reply.
	require.NoError(t, d.Send(zmq4.NewMsgFrom(seq8(0))))
	require.NoError(t, d.Send(zmq4.NewMsgFrom([]byte{}, seq8(0), []byte("x"))))
	require.NoError(t, d.Send(zmq4.NewMsgFrom(RequestFrames(2)...)))
	m, err := d.Recv()
	require.NoError(t, err)
	require.Equal(t, seq8(2), m.Frames[2], "the first reply answers the valid request")
	m, err = d.Recv()
	require.NoError(t, err)
	require.Equal(t, seq8(EndSeq), m.Frames[2])

	// Counted once END is written, which may be just after the client read it.
	require.Eventually(t, func() bool { return srv.Stats().Requests == 1 }, 5*time.Second, time.Millisecond)
	st := srv.Stats()
	require.EqualValues(t, 2, st.Invalid)
	require.EqualValues(t, 1, st.Requests)
	require.EqualValues(t, 1, st.Batches)
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP kvroute_replay_server_invalid_requests_total Replay messages ignored because they were not [delimiter, start].
# TYPE kvroute_replay_server_invalid_requests_total counter
kvroute_replay_server_invalid_requests_total 2
# HELP kvroute_replay_server_requests_total Replay requests answered.
# TYPE kvroute_replay_server_requests_total counter
kvroute_replay_server_requests_total 1
`), "kvroute_replay_server_invalid_requests_total", "kvroute_replay_server_requests_total"))

	// A second server on the same registry is a constructor error.
	_, err = NewServer(ServerConfig{Addr: "127.0.0.1:0"}, NewBuffer(1), Options{Set: telemetry.Set{Registerer: reg}})
	require.Error(t, err)
}

func TestServerCloseWithClientsConnected(t *testing.T) {
	defer leakcheck.Check(t)()
	srv, err := NewServer(ServerConfig{Addr: "127.0.0.1:0", MaxConns: 2}, filledBuffer(0, 0, 1000), Options{})
	require.NoError(t, err)
	var socks []zmq4.Socket
	for range 3 {
		socks = append(socks, dealer(t, srv.Endpoint()))
	}
	require.Eventually(t, func() bool { return srv.Stats().Rejected == 1 }, 5*time.Second, 5*time.Millisecond)
	// One client asks for a large replay and never reads it.
	// Which of the three connections the server rejected depends on the
	// order the handshakes finished in, so the request goes out on the
	// first socket whose connection is still open.
	sent := false
	for _, s := range socks {
		if err := s.Send(zmq4.NewMsgFrom(RequestFrames(0)...)); err == nil {
			sent = true
			break
		} else {
			require.ErrorIs(t, err, zmq4.ErrClosedConn)
		}
	}
	require.True(t, sent, "no connection accepted the request")
	require.NoError(t, srv.Close())
	require.NoError(t, srv.Close(), "idempotent")
	for _, s := range socks {
		// The server has closed every connection; whether a client's
		// socket noticed before its own Close is a race, and a socket that
		// did reports its connection already closed.
		if err := zmqx.CloseDrain(s); err != nil {
			require.ErrorIs(t, err, zmq4.ErrClosedConn)
		}
	}
}

func TestServerConfigValidate(t *testing.T) {
	for _, c := range []ServerConfig{
		{Layout: "v2"}, {MaxConns: -1}, {IdleTimeout: -1}, {WriteTimeout: -1}, {HandshakeTimeout: -1}, {SendHWM: -1},
	} {
		require.Error(t, c.Validate(), "%+v", c)
	}
	_, err := NewServer(ServerConfig{}, nil, Options{})
	require.Error(t, err)
	_, err = NewServer(ServerConfig{Addr: "ipc:///tmp/x"}, NewBuffer(1), Options{})
	require.Error(t, err)
}

func TestBuffer(t *testing.T) {
	b := NewBuffer(5)
	require.Equal(t, 5, b.Cap())
	require.Equal(t, DefaultBufferSize, NewBuffer(0).Cap())
	_, _, ok := b.Bounds()
	require.False(t, ok)

	for s := uint64(10); s < 18; s++ {
		if s == 14 {
			continue // a batch that failed to publish leaves a hole
		}
		b.Add(s, nil, payloadFor(s))
	}
	seqs := func(es []Entry) []uint64 {
		var out []uint64
		for _, e := range es {
			out = append(out, e.Seq)
		}
		return out
	}
	require.Equal(t, 5, b.Len())
	lo, hi, ok := b.Bounds()
	require.True(t, ok)
	require.Equal(t, []uint64{12, 17}, []uint64{lo, hi})
	require.Equal(t, []uint64{12, 13, 15, 16, 17}, seqs(b.From(0, nil)))
	require.Equal(t, []uint64{15, 16, 17}, seqs(b.From(14, nil)))
	require.Equal(t, []uint64{16, 17}, seqs(b.From(16, nil)))
	require.Empty(t, b.From(18, nil))
	require.Equal(t, string(payloadFor(13)), string(b.From(13, nil)[0].Payload))

	// The publisher restarted: sequences went back, the old stream is dropped.
	b.Add(0, nil, payloadFor(0))
	require.Equal(t, []uint64{0}, seqs(b.From(0, nil)))
	b.Reset()
	require.Zero(t, b.Len())
}

// A peer that never completes a ZMTP handshake (here it writes an HTTP
// request) is dropped and counted in Stats and in
// kvroute_replay_server_handshake_failures_total.
func TestServerCountsFailedHandshakes(t *testing.T) {
	defer leakcheck.Check(t)()
	reg := prometheus.NewRegistry()
	srv, err := NewServer(ServerConfig{Addr: "127.0.0.1:0"}, NewBuffer(1), Options{Set: telemetry.Set{Registerer: reg}})
	require.NoError(t, err)
	c, err := net.Dial("tcp", srv.Addr().String())
	require.NoError(t, err)
	_, err = c.Write([]byte("GET / HTTP/1.1\r\n\r\n" + strings.Repeat("x", 64)))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return srv.Stats().Handshakes == 1 }, time.Minute, time.Millisecond)
	_ = c.Close()
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP kvroute_replay_server_handshake_failures_total Replay connections dropped because their ZMTP handshake failed.
# TYPE kvroute_replay_server_handshake_failures_total counter
kvroute_replay_server_handshake_failures_total 1
`), "kvroute_replay_server_handshake_failures_total"))
	require.NoError(t, srv.Close())
}

// With SendHWM, a reply is counted as sent (Batches, or Requests for END)
// only when it is queued: one that finds the queue full is counted in
// Dropped alone. The queue here is drained by the test, not written, so
// which replies fit is certain.
func TestServerCountsDroppedRepliesOnlyAsDropped(t *testing.T) {
	s := &Server{cfg: ServerConfig{SendHWM: 2}}
	out := &sender{s: s, q: make(chan [][]byte, 2)} // no drain: the test takes what is queued
	ents := []Entry{{Seq: 0, Topic: []byte("t"), Payload: []byte("a")}, {Seq: 1, Topic: []byte("t"), Payload: []byte("b")},
		{Seq: 2, Topic: []byte("t"), Payload: []byte("c")}}
	queued := func() (seqs []uint64) {
		for len(out.q) > 0 {
			seqs = append(seqs, parseStart((<-out.q)[2]))
		}
		return seqs
	}

	require.NoError(t, s.reply(out, ents))
	require.Equal(t, ServerStats{Batches: 2, Dropped: 2}, s.Stats(), "batch 2 and END dropped, not counted as sent")
	require.Equal(t, []uint64{0, 1}, queued())

	require.NoError(t, s.reply(out, ents[2:]))
	require.Equal(t, ServerStats{Requests: 1, Batches: 3, Dropped: 2}, s.Stats(), "batch 2 and END queued")
	require.Equal(t, []uint64{2, EndSeq}, queued())
}
