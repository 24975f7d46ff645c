package h1pool

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
)

// firstRequestServer is a real httptest server (an engine) that answers every request
// with the client's address of its connection and can close, as a Go
// engine's ReadHeaderTimeout does some seconds after the accept, every
// connection that has carried no request yet.
type firstRequestServer struct {
	*httptest.Server
	mu      sync.Mutex
	conns   map[string]net.Conn // by client address, accepted and not closed
	carried map[string]bool     // client addresses whose connection carried a request
}

func newFirstRequestServer() *firstRequestServer {
	e := &firstRequestServer{conns: map[string]net.Conn{}, carried: map[string]bool{}}
	e.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		e.mu.Lock()
		e.carried[r.RemoteAddr] = true
		e.mu.Unlock()
		_, _ = io.WriteString(w, r.RemoteAddr)
	}))
	e.Config.ConnState = func(c net.Conn, s http.ConnState) {
		e.mu.Lock()
		defer e.mu.Unlock()
		switch s {
		case http.StateNew:
			e.conns[c.RemoteAddr().String()] = c
		case http.StateClosed, http.StateHijacked:
			delete(e.conns, c.RemoteAddr().String())
		}
	}
	e.Start()
	return e
}

// closeUnused closes the connections that have carried no request and
// returns how many it closed.
func (e *firstRequestServer) closeUnused() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for addr, c := range e.conns {
		if !e.carried[addr] {
			_ = c.Close()
			n++
		}
	}
	return n
}

func (e *firstRequestServer) hostPort() string { return strings.TrimPrefix(e.URL, "http://") }

// upSend sends one request and returns its response, body unread: its
// connection stays in use until the body is read.
func upSend(t *testing.T, tr http.RoundTripper, hostPort string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "http://"+hostPort+"/v1/x", strings.NewReader("{}"))
	require.NoError(t, err)
	resp, err := tr.RoundTrip(req)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	return resp
}

// upServedBy reads resp to its end (its connection goes back to the pool)
// and returns the client address of the connection that served it.
func upServedBy(t *testing.T, resp *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	return string(b)
}

// A warmed connection serves the next request to its engine, before the
// connections that requests in flight gave back after it was pooled. On
// the LIFO stack it sank under them and waited unused while the engine's
// concurrency stayed below its depth; an engine that closes a connection
// with no request after a timeout from the accept (a Go engine's
// ReadHeaderTimeout: 10 s in the simulated engine), and keeps one that
// carried a request, closed it, and the next peak found it closed: the
// gateway dropped it, a request waited for a new dial, and the engine's
// warming stopped for Config.IdleTimeout. That is how
// TestEngineConnectionsAreNotChurnedAtSteadyState saw an engine's warmed
// connections redialed when a loaded machine stretched it past 10 s.
func TestTransportUsesAWarmedConnectionFirst(t *testing.T) {
	defer leakcheck.Check(t)()
	e := newFirstRequestServer()
	defer e.Close()
	tr := New(Config{MaxIdlePerHost: 8, WarmAhead: true})
	defer tr.Close()
	tr.RaisePeak(2) // a gateway's peak: two requests in flight
	key := e.hostPort()

	// The first request finds the pool empty: it dials, and its engine's
	// warmer dials a second connection, which it pools while the first
	// request still holds its own.
	r1 := upSend(t, tr, key)
	tr.warmers.Wait()
	require.Equal(t, 1, tr.IdleConns(key), "the warmed connection is pooled")
	first := upServedBy(t, r1) // its connection goes back after the warmed one
	require.Equal(t, 2, tr.IdleConns(key))

	// The next request takes the warmed connection, not the one given back
	// last.
	second := upServedBy(t, upSend(t, tr, key))
	require.NotEqual(t, first, second, "the warmed connection serves the next request")

	// Every connection has carried a request: a timeout on connections
	// without one closes none, and two requests at once (the peak) find two
	// open connections.
	require.Zero(t, e.closeUnused(), "connections that carried no request")
	r3, r4 := upSend(t, tr, key), upSend(t, tr, key)
	require.ElementsMatch(t, []string{first, second}, []string{upServedBy(t, r3), upServedBy(t, r4)})
	require.Equal(t, int64(2), tr.dials.Load(), "the first request's dial and the warmer's")
	require.Equal(t, int64(1), tr.waited.Load(), "only the first request waited for a dial")
	require.Equal(t, map[string]DialCount{key: {Dials: 2, Waited: 1}}, tr.DialedTo(), "the same, by host")
	require.False(t, tr.PeerClosedIdle(key), "the server closed no idle connection: warming goes on")
}

// ageIdle makes every idle connection to key look idle for d longer than it
// has been: a test's way past Config.IdleTimeout without waiting for it.
func ageIdle(tr *Transport, key string, d time.Duration) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	for _, pc := range append(slices.Clone(tr.idle[key]), tr.fresh[key]...) {
		pc.idleSince = pc.idleSince.Add(-d)
	}
}

// A host's pool is warmed to the peak of requests in flight, which a
// gateway raises with its requests to all engines together, so an engine
// that gets fewer at once than that peak leaves the bottom of its stack
// unused. The idle timeout closed those connections (CloseIdle) and the
// warmer dialed them again at the next request: with two engines at 256
// concurrent requests each engine kept 256 connections and used about 128,
// and every 90 s (Config.IdleTimeout) the gateway closed and redialed the
// rest, 72–80 per window in bench/cmd/gwload's first windows at 256 after
// 64. A connection the warmer would dial again is kept however long it is
// idle.
func TestTransportKeepsIdleConnectionsTheWarmerWouldRedial(t *testing.T) {
	defer leakcheck.Check(t)()
	e := newFirstRequestServer()
	defer e.Close()
	tr := New(Config{MaxIdlePerHost: 8, WarmAhead: true})
	defer tr.Close()
	tr.RaisePeak(4) // the gateway's peak; this engine gets one request at a time
	key := e.hostPort()
	for range 8 { // the first dials, the warmer dials three more, the next three take them
		upServedBy(t, upSend(t, tr, key))
		tr.WaitWarmers()
	}
	require.Equal(t, map[string]int{key: 4}, tr.OpenConns())
	require.Equal(t, 4, tr.IdleConns(key))
	dials := tr.Stats().Dials
	require.Equal(t, int64(4), dials)

	ageIdle(tr, key, tr.cfg.IdleTimeout) // the three at the bottom went unused that long
	upServedBy(t, upSend(t, tr, key))
	tr.WaitWarmers()
	st := tr.Stats()
	require.Zero(t, st.Closes[CloseIdle], "connections the warmer keeps are not closed for idleness")
	require.Equal(t, dials, st.Dials, "and not dialed again")
	require.Equal(t, map[string]int{key: 4}, tr.OpenConns())
	require.Equal(t, 4, tr.IdleConns(key))
}

// Without warm-ahead nothing redials an idle connection closed after
// Config.IdleTimeout, and the pool closes it.
func TestTransportClosesIdleConnectionsNoWarmerKeeps(t *testing.T) {
	defer leakcheck.Check(t)()
	e := newFirstRequestServer()
	defer e.Close()
	tr := New(Config{MaxIdlePerHost: 8})
	defer tr.Close()
	key := e.hostPort()
	r1, r2 := upSend(t, tr, key), upSend(t, tr, key)
	upServedBy(t, r1)
	upServedBy(t, r2)
	require.Equal(t, 2, tr.IdleConns(key))

	ageIdle(tr, key, tr.cfg.IdleTimeout)
	upServedBy(t, upSend(t, tr, key))
	st := tr.Stats()
	require.Equal(t, int64(2), st.Closes[CloseIdle], "both idle past the timeout")
	require.Equal(t, int64(3), st.Dials, "the request dialed a new one")
	require.Equal(t, map[string]int{key: 1}, tr.OpenConns())
}

// A warmer whose dial completes after Retain forgot its host closes the
// connection (the host is no longer kept) and leaves no dial count behind.
// It counted the dial after pooling it: the close had taken the host's
// open count to zero and deleted its entries, and the count re-created
// the host's entry in DialedTo, which nothing deleted any more.
func TestTransportWarmDialEndingAfterRetainLeavesNoDialCount(t *testing.T) {
	defer leakcheck.Check(t)()
	e := newFirstRequestServer()
	defer e.Close()
	var dials atomic.Int64
	inDial, hold := make(chan struct{}), make(chan struct{})
	tr := New(Config{MaxIdlePerHost: 8, WarmAhead: true, OnDial: func() {
		if dials.Add(1) == 2 { // the warmer's dial (the first is the request's own)
			close(inDial)
			<-hold
		}
	}})
	defer tr.Close()
	key := e.hostPort()
	upServedBy(t, upSend(t, tr, key)) // a peak of 1: one connection, no warmer
	tr.WaitWarmers()
	tr.RaisePeak(2)
	resp := upSend(t, tr, key) // below the peak: the warmer dials, held in OnDial
	<-inDial
	upServedBy(t, resp)
	require.Equal(t, map[string]DialCount{key: {Dials: 1, Waited: 1}}, tr.DialedTo())
	tr.Retain(nil) // the engine is removed while the warmer's dial is in progress
	require.Equal(t, map[string]int{key: 1}, tr.OpenConns(), "the warmer's dial holds the host's place")
	close(hold)
	tr.WaitWarmers()
	require.Empty(t, tr.OpenConns(), "the warmed connection is closed, not pooled")
	require.Equal(t, int64(2), tr.Stats().Closes[CloseIdle])
	require.Empty(t, tr.DialedTo(), "a host with nothing open left its dial count behind")
}
