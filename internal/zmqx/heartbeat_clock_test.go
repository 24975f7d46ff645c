package zmqx

import (
	"bytes"
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/telemetry"
)

// Heartbeats run on Options.Clock: on a manual clock a PING goes out when
// the clock passes the interval, and a silent peer is declared dead when it
// passes the timeout of the unanswered PING, with no wall time waited.
func TestHeartbeatRunsOnTheOptionsClock(t *testing.T) {
	defer leakcheck.Check(t)()
	peer := startPingPeer(t, false)
	defer peer.srv.Stop()
	clk := telemetry.NewManual(time.Unix(1_800_000_000, 0))
	o := Options{HeartbeatInterval: time.Minute, HeartbeatTimeout: 2 * time.Minute, Clock: clk}
	s := NewSub(context.Background(), o, nil)
	defer CloseDrain(s)
	require.NoError(t, Dial(s, peer.srv.Addr())) // returns once the handshake is done
	require.Eventually(t, func() bool { return clk.Waiters() == 1 }, 10*time.Second, time.Millisecond,
		"the PING ticker is armed on the clock")

	clk.Advance(time.Minute)
	select {
	case <-peer.got:
	case <-time.After(10 * time.Second):
		t.Fatal("no PING at one interval")
	}
	require.Eventually(t, func() bool { return clk.Waiters() == 2 }, 10*time.Second, time.Millisecond,
		"the unanswered PING's timeout is armed")
	errc := make(chan error, 1)
	go func() {
		_, _, err := Recv(s)
		errc <- err
	}()
	clk.Advance(2 * time.Minute)
	select {
	case err := <-errc:
		require.True(t, isGuardErr(err, ErrPeerDead), "got %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("the silent peer was not declared dead at the timeout")
	}
}

// A PONG that arrives before the heartbeat has armed the timeout of its PING
// still counts as the answer: the bytes received are sampled before the PING
// goes out, not after, so a peer that answers at once is not declared dead
// when the timeout, shorter than the interval, passes with nothing more.
func TestHeartbeatCountsAPongReadBeforeTheTimeoutIsArmed(t *testing.T) {
	defer leakcheck.Check(t)()
	peer := startPingPeer(t, true)
	defer peer.srv.Stop()
	clk := newHandoffClock(time.Unix(1_800_000_000, 0))
	defer clk.close()
	pongRead := make(chan struct{})
	ctx := context.WithValue(context.Background(), dialHookKey{}, func(c net.Conn, err error) (net.Conn, error) {
		if err != nil {
			return nil, err
		}
		return &pongFirstConn{Conn: c, pongRead: pongRead}, nil
	})
	o := Options{HeartbeatInterval: time.Minute, HeartbeatTimeout: 30 * time.Second, Clock: clk}
	s := NewSub(ctx, o, nil)
	defer CloseDrain(s)
	require.NoError(t, Dial(s, peer.srv.Addr()))
	errc := make(chan error, 1)
	go func() {
		_, _, err := Recv(s) // only PONGs arrive; Recv skips them
		errc <- err
	}()
	clk.WaitForWaiters(1) // the PING ticker

	clk.Advance(time.Minute) // PING; its write returns once the PONG is read
	select {
	case <-peer.got:
	case <-time.After(10 * time.Second):
		t.Fatal("no PING at one interval")
	}
	select {
	case <-pongRead:
	case <-time.After(10 * time.Second):
		t.Fatal("the PONG was not read")
	}
	clk.WaitForWaiters(2) // the timeout of the PING
	clk.Advance(30 * time.Second)
	select {
	case <-clk.consumed: // the heartbeat has judged the peer
	case <-time.After(10 * time.Second):
		t.Fatal("the heartbeat did not take the timeout")
	}
	clk.Advance(30 * time.Second) // the next PING, from a live connection only
	select {
	case <-peer.got:
	case err := <-errc:
		t.Fatalf("a peer that answered the PING was declared dead: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("no second PING")
	}
	_ = s.Close()
	<-errc
}

// pongFirstConn holds the write of the first PING until the peer's PONG has
// been read and handed on (the reader has asked for more bytes since): the
// order a fast peer and a descheduled heartbeat goroutine produce.
type pongFirstConn struct {
	net.Conn
	pongRead  chan struct{} // closed once the PONG has been read
	pinged    atomic.Bool
	afterPing atomic.Int64 // bytes read since the PING was written
	once      sync.Once
}

func (c *pongFirstConn) Read(p []byte) (int, error) {
	if c.afterPing.Load() >= int64(len(pongCommand(nil))) {
		c.once.Do(func() { close(c.pongRead) })
	}
	n, err := c.Conn.Read(p)
	if c.pinged.Load() {
		c.afterPing.Add(int64(n))
	}
	return n, err
}

func (c *pongFirstConn) Write(p []byte) (int, error) {
	first := bytes.Equal(p, pingCommand) && !c.pinged.Swap(true) // before the write: the PONG may be read before it returns
	n, err := c.Conn.Write(p)
	if first {
		select {
		case <-c.pongRead:
		case <-time.After(10 * time.Second):
		}
	}
	return n, err
}

// handoffClock is a Manual clock whose timers hand each firing over on an
// unbuffered channel, so that a test knows when the component took it.
type handoffClock struct {
	*telemetry.Manual
	consumed chan struct{} // a token per firing taken
	stop     chan struct{}
	wg       sync.WaitGroup
}

func newHandoffClock(start time.Time) *handoffClock {
	return &handoffClock{Manual: telemetry.NewManual(start), consumed: make(chan struct{}, 16), stop: make(chan struct{})}
}

// NewTimer returns a Manual timer whose firings are handed over.
func (c *handoffClock) NewTimer(d time.Duration) telemetry.Timer {
	t := handoffTimer{Timer: c.Manual.NewTimer(d), c: make(chan time.Time)}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		for {
			select {
			case v := <-t.Timer.C():
				select {
				case t.c <- v:
					c.consumed <- struct{}{}
				case <-c.stop:
					return
				}
			case <-c.stop:
				return
			}
		}
	}()
	return t
}

func (c *handoffClock) close() {
	close(c.stop)
	c.wg.Wait()
}

type handoffTimer struct {
	telemetry.Timer
	c chan time.Time
}

func (t handoffTimer) C() <-chan time.Time { return t.c }
