package h1pool

import (
	"bufio"
	"context"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/telemetry"
)

// closeWatch counts the Transport's closes on a channel, so that a test
// waits for the closes a sweep makes (on the sweep's goroutine) instead of
// polling.
func closeWatch(cfg *Config) <-chan CloseReason {
	ch := make(chan CloseReason, 64)
	cfg.OnClose = func(r CloseReason) { ch <- r }
	return ch
}

// awaitCloses waits for n closes, each for idleness.
func awaitCloses(t *testing.T, ch <-chan CloseReason, n int) {
	t.Helper()
	for range n {
		require.Equal(t, CloseIdle, <-ch)
	}
}

// manualStart is the Manual clock's start in these tests.
var manualStart = time.Unix(1_000_000, 0)

// manualPool is a Transport with cfg on a Manual clock: idle timeout 10 s
// (a sweep every 5 s), 8 idle connections per host, closes counted on a
// channel.
type manualPool struct {
	*Transport
	clk    *telemetry.Manual
	closes <-chan CloseReason
}

func newManualPool(cfg Config) manualPool {
	clk := telemetry.NewManual(manualStart)
	cfg.Clock, cfg.IdleTimeout, cfg.MaxIdlePerHost = clk, 10*time.Second, 8
	closes := closeWatch(&cfg)
	return manualPool{Transport: New(cfg), clk: clk, closes: closes}
}

// stepUntil moves the clock one sweep interval at a time, each step after
// the sweep due in the last one has run (and armed the next), and sends one
// request to key after each, until the clock reaches at.
func (p manualPool) stepUntil(t *testing.T, key string, at time.Duration) {
	t.Helper()
	for p.clk.Now().Before(manualStart.Add(at)) {
		require.Equal(t, 1, p.clk.WaitForWaiters(1))
		p.clk.Advance(5 * time.Second)
		upServedBy(t, upSend(t, p, key))
		p.WaitWarmers()
	}
}

// warmTo sends requests one at a time to key until the warmer has brought it
// to want open connections, all idle.
func warmTo(t *testing.T, tr *Transport, key string, want int) {
	t.Helper()
	for range 2 * want {
		upServedBy(t, upSend(t, tr, key))
		tr.WaitWarmers()
	}
	require.Equal(t, want, tr.OpenConns()[key])
	require.Equal(t, want, tr.IdleConns(key))
}

// A burst's peak is not kept forever: once two windows have passed with one
// request at a time, the warmer keeps one connection and the three the
// burst left, idle past the timeout, are closed (before, every engine kept
// the gateway's highest peak ever until the engine closed them).
func TestTransportForgetsAPeakAfterItsWindow(t *testing.T) {
	defer leakcheck.Check(t)()
	e := newFirstRequestServer()
	defer e.Close()
	tr := newManualPool(Config{WarmAhead: true, PeakWindow: time.Minute})
	defer tr.Close()
	tr.RaisePeak(4) // the gateway's burst
	key := e.hostPort()
	warmTo(t, tr.Transport, key, 4)

	// One request every 5 s (the sweep's interval). Within the burst's
	// window and the next one the four are kept, however long three of them
	// have been idle.
	tr.stepUntil(t, key, 115*time.Second)
	require.Zero(t, tr.Stats().Closes[CloseIdle])
	require.Equal(t, int64(4), tr.Stats().Peak)
	require.Equal(t, map[string]int{key: 4}, tr.OpenConns())

	// Past two windows the peak is the one request in flight of the window
	// before: the three are closed, by the sweep or by a request on the way.
	tr.stepUntil(t, key, 130*time.Second)
	awaitCloses(t, tr.closes, 3)
	require.Equal(t, int64(1), tr.Stats().Peak)
	require.Equal(t, map[string]int{key: 1}, tr.OpenConns())
	require.Equal(t, int64(4), tr.Stats().Dials, "nothing dialed again")
}

// A negative PeakWindow keeps the peak, and with it the connections, for
// good (the behaviour before windows).
func TestTransportKeepsThePeakWithANegativeWindow(t *testing.T) {
	defer leakcheck.Check(t)()
	e := newFirstRequestServer()
	defer e.Close()
	tr := newManualPool(Config{WarmAhead: true, PeakWindow: -1})
	defer tr.Close()
	tr.RaisePeak(4)
	key := e.hostPort()
	warmTo(t, tr.Transport, key, 4)
	for range 3 {
		tr.clk.Advance(time.Hour) // sweeps run and close nothing
		upServedBy(t, upSend(t, tr, key))
		tr.WaitWarmers()
	}
	require.Equal(t, int64(4), tr.Stats().Peak)
	require.Zero(t, tr.Stats().Closes[CloseIdle])
	require.Equal(t, map[string]int{key: 4}, tr.OpenConns())
}

// Idle connections to a host no request comes to any more (an engine or a
// renderer removed from the pool) are closed by the sweep once idle past
// the timeout; before, they stayed open until a request to that host.
func TestTransportSweepClosesIdleConnectionsOfAHostLeftAlone(t *testing.T) {
	defer leakcheck.Check(t)()
	e := newFirstRequestServer()
	defer e.Close()
	tr := newManualPool(Config{})
	defer tr.Close()
	clk, key := tr.clk, e.hostPort()
	r1, r2 := upSend(t, tr, key), upSend(t, tr, key)
	upServedBy(t, r1)
	upServedBy(t, r2)
	require.Equal(t, 2, tr.IdleConns(key))
	require.Equal(t, 1, clk.WaitForWaiters(1), "one sweep armed while connections are idle")

	// Half the timeout on, a sweep finds them not yet idle long enough and
	// arms the next.
	clk.Advance(5 * time.Second)
	require.Equal(t, 1, clk.WaitForWaiters(1))
	require.Equal(t, 2, tr.IdleConns(key))

	// At the timeout the next sweep closes both, and arms none: the pool is
	// empty.
	clk.Advance(5 * time.Second)
	awaitCloses(t, tr.closes, 2)
	require.Empty(t, tr.OpenConns())
	require.Zero(t, tr.IdleConns(key))
	tr.mu.Lock()
	require.Nil(t, tr.sweepTimer, "no sweep armed for an empty pool")
	require.Empty(t, tr.lastUse, "the host left nothing behind")
	tr.mu.Unlock()
}

// The connections a warmer keeps stay past the timeout while their host
// gets requests; once it has had none for a window (an engine removed from
// the pool, whose warmed connections a gateway would otherwise hold until
// the engine closed them), the sweep closes them, while another engine that
// still gets requests keeps its own.
func TestTransportSweepClosesAWarmHostsConnectionsAfterAWindowWithoutRequests(t *testing.T) {
	defer leakcheck.Check(t)()
	gone, stays := newFirstRequestServer(), newFirstRequestServer()
	defer gone.Close()
	defer stays.Close()
	tr := newManualPool(Config{WarmAhead: true, PeakWindow: time.Minute})
	defer tr.Close()
	tr.RaisePeak(2)
	warmTo(t, tr.Transport, stays.hostPort(), 2)
	warmTo(t, tr.Transport, gone.hostPort(), 2) // its last request, at the start
	open := func() map[string]int { return tr.OpenConns() }
	require.Equal(t, map[string]int{gone.hostPort(): 2, stays.hostPort(): 2}, open())

	// Every 5 s (the sweep's interval) a request to the engine that stays.
	tr.stepUntil(t, stays.hostPort(), 55*time.Second)
	require.Zero(t, tr.Stats().Closes[CloseIdle], "within the window both keep theirs, idle past the timeout")
	require.Equal(t, 2, tr.IdleConns(gone.hostPort()))

	tr.stepUntil(t, stays.hostPort(), 70*time.Second)
	awaitCloses(t, tr.closes, 2)
	require.Equal(t, map[string]int{stays.hostPort(): 2}, open())
}

// Close cancels a pending sweep and waits for a running one: no goroutine
// is left (leakcheck), and connections given back later are closed.
func TestTransportCloseStopsTheSweep(t *testing.T) {
	defer leakcheck.Check(t)()
	e := newFirstRequestServer()
	defer e.Close()
	tr := newManualPool(Config{})
	clk := tr.clk
	upServedBy(t, upSend(t, tr, e.hostPort()))
	require.Equal(t, 1, clk.WaitForWaiters(1))
	tr.Close()
	require.Zero(t, clk.Waiters(), "the pending sweep is cancelled")
	require.Empty(t, tr.OpenConns())
	clk.Advance(time.Hour)
}

// Retain closes the idle connections of a host left out at once, its
// connection in use when given back, and leaves the hosts kept alone; a
// later request to the host is served as to a new one.
func TestTransportRetainClosesARemovedHostsConnections(t *testing.T) {
	defer leakcheck.Check(t)()
	gone, stays := newFirstRequestServer(), newFirstRequestServer()
	defer gone.Close()
	defer stays.Close()
	cfg := Config{MaxIdlePerHost: 8, WarmAhead: true, PeakWindow: -1} // kept warm for good but for Retain
	closes := closeWatch(&cfg)
	tr := New(cfg)
	defer tr.Close()
	tr.RaisePeak(3)
	warmTo(t, tr, stays.hostPort(), 3)
	warmTo(t, tr, gone.hostPort(), 3)

	inFlight := upSend(t, tr, gone.hostPort())           // holds one of the three
	tr.Retain([]string{stays.hostPort(), "127.0.0.1:1"}) // a host kept with nothing open changes nothing
	awaitCloses(t, closes, 2)
	require.Zero(t, tr.IdleConns(gone.hostPort()))
	upServedBy(t, inFlight) // given back after Retain: closed, not pooled
	awaitCloses(t, closes, 1)
	require.Equal(t, map[string]int{stays.hostPort(): 3}, tr.OpenConns())
	tr.mu.Lock()
	require.Empty(t, tr.forgotten, "the host left nothing behind once it had nothing open")
	tr.mu.Unlock()

	// A request later: a new connection, pooled as usual (and warmed
	// again: the host is in use).
	upServedBy(t, upSend(t, tr, gone.hostPort()))
	tr.WaitWarmers()
	require.Equal(t, 3, tr.IdleConns(gone.hostPort()))
	require.Equal(t, 3, tr.IdleConns(stays.hostPort()))
}

// newIdleClosingServer is a server that closes its first connection once it
// has answered one request, while idle (as a server with a short keep-alive
// timeout does), and keeps the others.
func newIdleClosingServer(t *testing.T) *rawServer {
	return newRawServer(t, func(n int64, c net.Conn, br *bufio.Reader) {
		if n == 1 {
			answer(c, br, "")
			return
		}
		for {
			if _, ok := answer(c, br, ""); !ok {
				return
			}
		}
	})
}

// markPeerClosed has the Transport find an idle connection to key closed by
// its server (a newIdleClosingServer): one request, the server's close, and
// a request that finds the connection closed and dials another, which it
// gives back to the pool.
func markPeerClosed(t *testing.T, tr *Transport, key string) {
	t.Helper()
	_, _, err := upPost(t, context.Background(), tr, key, "one")
	require.NoError(t, err)
	require.Eventually(t, func() bool { // the server's FIN reaches the idle socket
		tr.mu.Lock()
		defer tr.mu.Unlock()
		s := tr.idle[key]
		return len(s) == 1 && s[0].peek.peerClosed()
	}, wait, time.Millisecond)
	_, _, err = upPost(t, context.Background(), tr, key, "two")
	require.NoError(t, err)
	require.True(t, tr.PeerClosedIdle(key))
}

// The mark of a server found closing an idle connection (which stops its
// warming for Config.IdleTimeout) is deleted by the sweep once that old,
// also on a host still in use. It was never deleted: every host:port that
// ever closed an idle connection stayed in the map for the Transport's
// life, one more at each rollout of engines on new pod addresses.
func TestTransportSweepForgetsAPeerClosedMarkAfterTheIdleTimeout(t *testing.T) {
	defer leakcheck.Check(t)()
	e := newIdleClosingServer(t)
	defer e.close()
	tr := newManualPool(Config{})
	defer tr.Close()
	clk, key := tr.clk, e.hostPort()
	markPeerClosed(t, tr.Transport, key) // at the start
	require.Equal(t, CloseAsked, <-tr.closes, "the connection found closed")

	// Half the timeout on, the sweep keeps the mark (and arms the next).
	require.Equal(t, 1, clk.WaitForWaiters(1))
	clk.Advance(5 * time.Second)
	require.Equal(t, 1, clk.WaitForWaiters(1))
	require.True(t, tr.PeerClosedIdle(key))
	upServedBy(t, upSend(t, tr, key)) // the host is still in use

	// At the timeout the next sweep deletes it; the connection, idle for
	// half the timeout, stays.
	clk.Advance(5 * time.Second)
	require.Equal(t, 1, clk.WaitForWaiters(1))
	require.False(t, tr.PeerClosedIdle(key), "a peer-closed mark past the idle timeout")
	require.Equal(t, map[string]int{key: 1}, tr.OpenConns())
	require.Equal(t, 1, tr.IdleConns(key))
}

// Retain deletes the peer-closed mark of a host it leaves out, also once
// the host has nothing open, and keeps those of the hosts kept.
func TestTransportRetainForgetsARemovedHostsPeerClosedMark(t *testing.T) {
	defer leakcheck.Check(t)()
	e := newIdleClosingServer(t)
	defer e.close()
	tr := New(Config{MaxIdlePerHost: 4})
	defer tr.Close()
	key := e.hostPort()
	markPeerClosed(t, tr, key)

	tr.Retain([]string{key})
	require.True(t, tr.PeerClosedIdle(key), "a host kept keeps its mark")
	tr.CloseIdleConnections()
	require.Empty(t, tr.OpenConns())
	require.True(t, tr.PeerClosedIdle(key), "the mark outlives the host's connections")

	tr.Retain(nil) // the engine is removed
	require.False(t, tr.PeerClosedIdle(key), "a host gone from use left its peer-closed mark behind")
	tr.mu.Lock()
	require.Empty(t, tr.peerClosedAt)
	tr.mu.Unlock()
}

func TestHostPort(t *testing.T) {
	for raw, want := range map[string]string{
		"http://10.0.0.1:8000":   "10.0.0.1:8000",
		"http://10.0.0.1:8000/":  "10.0.0.1:8000",
		"http://10.0.0.2":        "10.0.0.2:80",
		"https://r.example":      "r.example:443",
		"http://[::1]/v1":        "[::1]:80",
		"http://[::1]:9000/v1":   "[::1]:9000",
		"10.0.0.1:8000":          "", // no scheme: no host
		"http://bad host:1/x%zz": "",
	} {
		require.Equal(t, want, HostPort(raw), raw)
	}
}
