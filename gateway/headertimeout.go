package gateway

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The defaults of the Server's client connection timeouts.
const (
	// DefaultReadHeaderTimeout is the default of
	// ServerConfig.ReadHeaderTimeout.
	DefaultReadHeaderTimeout = 10 * time.Second
	// DefaultIdleTimeout is the default of ServerConfig.IdleTimeout.
	DefaultIdleTimeout = 2 * time.Minute
)

// The phases of a client connection that headerTimeouts tells apart.
const (
	phaseHeader  int32 = iota // a request header is due (the first, or the next after its first bytes)
	phaseHandler              // a handler has the request (its body reads have their own timeout)
	phaseIdle                 // between requests, no byte of the next one yet
)

// headerTimeouts counts the client connections that net/http closes because
// a request header did not arrive within ServerConfig.ReadHeaderTimeout.
// net/http closes them silently, so it watches the connections itself: a
// read that times out while a header is due is one.
//
// It also counts the requests net/http refuses itself before any handler
// sees them (a malformed request line or header, a header over the size
// limit, an unsupported HTTP version): net/http answers those with a 4xx
// or 5xx written on the connection while a header is due, and logs
// nothing.
type headerTimeouts struct {
	count   prometheus.Counter
	refused prometheus.Counter
}

func newHeaderTimeouts() *headerTimeouts {
	return &headerTimeouts{
		count: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kvroute_gateway_header_timeouts_total",
			Help: "Client connections closed because a request header did not arrive within the gateway's readHeaderTimeout.",
		}),
		refused: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kvroute_gateway_refused_requests_total",
			Help: "Requests the gateway's HTTP server refused before routing them: a malformed request line or header, a header over the size limit, an unsupported HTTP version.",
		}),
	}
}

// collectors are the counters, for the Server's registry.
func (ht *headerTimeouts) collectors() []prometheus.Collector {
	return []prometheus.Collector{ht.count, ht.refused}
}

// listener wraps ln so that its connections are watched.
func (ht *headerTimeouts) listener(ln net.Listener) net.Listener {
	return &watchedListener{Listener: ln, ht: ht}
}

// connState is the http.Server's ConnState hook: a connection back in
// StateIdle waits for its next request, not yet for a header.
func (ht *headerTimeouts) connState(c net.Conn, s http.ConnState) {
	if wc, ok := c.(*watchedConn); ok && s == http.StateIdle {
		wc.idleDeadlines.Store(0)
		wc.phase.Store(phaseIdle)
	}
}

// connContext is the http.Server's ConnContext hook: it makes the watched
// connection reachable from its requests (see handlerStarted).
func (ht *headerTimeouts) connContext(ctx context.Context, c net.Conn) context.Context {
	if wc, ok := c.(*watchedConn); ok {
		return context.WithValue(ctx, watchedConnKey{}, wc)
	}
	return ctx
}

// handlerStarted records that r's header has arrived and a handler has it.
func handlerStarted(r *http.Request) {
	if wc, ok := r.Context().Value(watchedConnKey{}).(*watchedConn); ok {
		wc.phase.Store(phaseHandler)
	}
}

type watchedConnKey struct{}

type watchedListener struct {
	net.Listener
	ht *headerTimeouts
}

// Accept returns the next connection, watched.
func (l *watchedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &watchedConn{Conn: c, ht: l.ht}, nil
}

// watchedConn is a client connection that counts a read timeout while a
// request header is due, once. Its phase is written by the connection's
// net/http goroutine (reads, deadlines, the ConnState hook, the handler's
// start) and read by whichever of them times out.
type watchedConn struct {
	net.Conn
	ht            *headerTimeouts
	phase         atomic.Int32
	idleDeadlines atomic.Int32 // read deadlines set since the connection went idle
	counted       atomic.Bool
}

// Write writes to the connection. net/http writes a response while a
// header is due only to refuse a request it could not read (its handlers
// write in phaseHandler): that one is counted.
func (c *watchedConn) Write(p []byte) (int, error) {
	if c.phase.Load() == phaseHeader && bytes.HasPrefix(p, []byte("HTTP/1.")) {
		c.ht.refused.Inc()
	}
	return c.Conn.Write(p)
}

// SetReadDeadline sets the connection's read deadline. After a request,
// net/http sets the idle timeout, waits for the next request's first
// bytes and then sets the header timeout: the second deadline since the
// connection went idle starts a header even when no read came between
// them, as when the next request's first bytes arrived with the previous
// request (pipelined) and were already buffered.
func (c *watchedConn) SetReadDeadline(t time.Time) error {
	if c.phase.Load() == phaseIdle && c.idleDeadlines.Add(1) > 1 {
		c.phase.CompareAndSwap(phaseIdle, phaseHeader)
	}
	return c.Conn.SetReadDeadline(t)
}

// Read reads from the connection; the first byte after an idle wait starts
// a header, and a timeout while one is due is counted.
func (c *watchedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.phase.CompareAndSwap(phaseIdle, phaseHeader)
	}
	if err != nil && c.phase.Load() == phaseHeader && errors.Is(err, os.ErrDeadlineExceeded) && c.counted.CompareAndSwap(false, true) {
		c.ht.count.Inc()
	}
	return n, err
}
