package zmqx

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/telemetry"
)

// A SUB whose owner stops calling Recv keeps a peer that answers every PING.
// go-zeromq's reader stops reading once its queue of 10 messages is full
// (the PONGs are queued too), so the PONGs that follow wait in the kernel:
// they have arrived, and the heartbeat counts them. When the owner reads
// again, everything the peer sent is delivered on the same connection.
func TestHeartbeatSparesPeerWhileOwnerIsNotReading(t *testing.T) {
	defer leakcheck.Check(t)()
	conns := make(chan net.Conn, 1)
	pinged := make(chan struct{}, 64)
	gone := make(chan struct{})
	srv := startFakeServer(t, func(c net.Conn) {
		defer close(gone)
		if handshakeAs(c, "PUB", true) != nil {
			return
		}
		conns <- c
		for {
			fl, body, err := readFrame(c)
			if err != nil {
				return
			}
			if name, _ := commandName(body); fl&flagCommand != 0 && name == "PING" {
				if _, err := c.Write(zmtpCommand("PONG", nil)); err != nil {
					return
				}
				pinged <- struct{}{}
			}
		}
	})
	defer srv.Stop()
	clk := telemetry.NewManual(time.Unix(1_800_000_000, 0))
	o := Options{HeartbeatInterval: time.Minute, HeartbeatTimeout: 90 * time.Second, Clock: clk}
	s := NewSub(context.Background(), o, nil)
	defer CloseDrain(s)
	require.NoError(t, Dial(s, srv.Addr()))
	peer := <-conns
	clk.WaitForWaiters(1) // the PING ticker

	// 40 PINGs: the first 11 PONGs fill go-zeromq's queue and its reader,
	// the other 29 are left unread across many heartbeat timeouts.
	for i := range 40 {
		clk.Advance(time.Minute)
		select {
		case <-pinged:
		case <-gone:
			t.Fatalf("the connection of a peer that answered every PING was closed after %d PINGs", i)
		case <-time.After(20 * time.Second):
			t.Fatalf("no PING %d", i+1)
		}
	}

	_, err := peer.Write(zmtpMessage([]byte("still here")))
	require.NoError(t, err)
	type recvd struct {
		m       zmq4.Msg
		skipped int
		err     error
	}
	got := make(chan recvd, 1)
	go func() {
		m, skipped, err := Recv(s)
		got <- recvd{m, skipped, err}
	}()
	select {
	case r := <-got:
		require.NoError(t, r.err)
		require.Equal(t, "still here", string(r.m.Frames[0]))
		require.Equal(t, 40, r.skipped, "every PONG is delivered, in order")
	case <-time.After(20 * time.Second):
		t.Fatal("the message was not delivered")
	}
}

// A Listener's connection whose owner pauses ReadMsg keeps a client that
// answers every PING: its PONGs wait in the kernel, and the owner reads
// them, and the client's message after them, when it resumes.
func TestListenerHeartbeatSparesClientWhileOwnerIsNotReading(t *testing.T) {
	defer leakcheck.Check(t)()
	clk := telemetry.NewManual(time.Unix(1_800_000_000, 0))
	o := Options{HeartbeatInterval: time.Minute, HeartbeatTimeout: 90 * time.Second, Clock: clk}
	l, err := Listen(context.Background(), "127.0.0.1:0", zmq4.Sub, o, nil)
	require.NoError(t, err)
	defer l.Close()
	raw := dialRaw(t, l.Addr().String())
	defer raw.Close()
	require.NoError(t, handshakeAs(raw, "PUB", false))
	c, err := l.Accept()
	require.NoError(t, err)
	defer c.Close()
	clk.WaitForWaiters(1) // the PING ticker

	require.NoError(t, raw.SetDeadline(time.Now().Add(30*time.Second))) // fail, never hang
	for i := range 20 {                                                 // many heartbeat timeouts, not one ReadMsg
		clk.Advance(time.Minute)
		fl, body, err := readFrame(raw)
		require.NoError(t, err, "the connection of a client that answered every PING was closed after %d PINGs", i)
		name, _ := commandName(body)
		require.True(t, fl&flagCommand != 0 && name == "PING", "got %q", body)
		_, err = raw.Write(zmtpCommand("PONG", nil))
		require.NoError(t, err)
	}
	_, err = raw.Write(zmtpMessage([]byte("still here")))
	require.NoError(t, err)
	select {
	case err := <-readMsgAsync(c):
		require.NoError(t, err)
	case <-time.After(20 * time.Second):
		t.Fatal("the message was not delivered")
	}
}
