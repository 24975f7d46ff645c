package connwatch

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The phases of a client connection that a Watcher tells apart.
const (
	phaseHeader  int32 = iota // a request header is due (the first, or the next after its first bytes)
	phaseHandler              // a handler has the request (its body reads have their own timeout)
	phaseIdle                 // between requests, no byte of the next one yet
	phaseRead                 // TLS only: a request has been read and no handler has it yet
)

// Watcher counts, on a server whose hooks it is given (Install), the
// connections closed because a request header came too late and the
// requests refused before any handler saw them. Its counters are the
// caller's, so that each server names its own metrics; New builds one.
type Watcher struct {
	// HeaderTimeouts counts connections closed because a request header
	// did not arrive within the server's ReadHeaderTimeout, once each.
	HeaderTimeouts prometheus.Counter
	// Refused counts the requests net/http answered itself before any
	// handler saw them.
	Refused prometheus.Counter
}

// New returns a Watcher whose two counters are built from headerTimeouts
// (HeaderTimeouts) and refused (Refused): the servers that watch their
// connections differ only in their metrics' names and help texts. The
// caller registers the counters, where and when its other metrics are.
func New(headerTimeouts, refused prometheus.CounterOpts) *Watcher {
	return &Watcher{
		HeaderTimeouts: prometheus.NewCounter(headerTimeouts),
		Refused:        prometheus.NewCounter(refused),
	}
}

// Install sets srv's ConnState and ConnContext hooks and wraps its Handler
// (so that a handler's start is known), and returns ln wrapped, for
// srv.Serve: connections accepted through it are watched. Call it before
// Serve, once per server.
//
// net/http answers "OPTIONS *" itself, without the Handler; unless srv
// disables that (DisableGeneralOptionsHandler), the wrapper answers it as
// net/http does, so that its start is known too: net/http reads the next
// request's first byte meanwhile and ends that read with a deadline in the
// past, which would otherwise be taken for a header timeout.
func (w *Watcher) Install(srv *http.Server, ln net.Listener) net.Listener {
	srv.ConnState = w.connState
	srv.ConnContext = w.connContext
	h := srv.Handler
	if h == nil {
		h = http.DefaultServeMux
	}
	options := !srv.DisableGeneralOptionsHandler
	srv.DisableGeneralOptionsHandler = true // answered below instead
	srv.Handler = http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		HandlerStarted(r)
		if options && r.RequestURI == "*" && r.Method == http.MethodOptions {
			serverOptions(rw, r)
			return
		}
		h.ServeHTTP(rw, r)
	})
	return &watchedListener{Listener: ln, w: w}
}

// serverOptions answers "OPTIONS *" as net/http's server does (its
// globalOptionsHandler): an empty 200, after reading at most 4 KiB of a
// body, closing the connection beyond.
func serverOptions(rw http.ResponseWriter, r *http.Request) {
	rw.Header().Set("Content-Length", "0")
	if r.ContentLength != 0 {
		_, _ = io.Copy(io.Discard, http.MaxBytesReader(rw, r.Body, 4<<10))
	}
}

// connState is the http.Server's ConnState hook: a connection back in
// StateIdle waits for its next request, not yet for a header.
// On a TLS connection, StateActive (a request read, well-formed or not)
// ends the header unless it timed out.
func (w *Watcher) connState(c net.Conn, s http.ConnState) {
	wc, isTLS := watched(c)
	switch {
	case wc == nil:
	case s == http.StateIdle:
		wc.idleDeadlines.Store(0)
		wc.phase.Store(phaseIdle)
	case s == http.StateActive && isTLS && !wc.counted.Load():
		wc.phase.CompareAndSwap(phaseHeader, phaseRead)
	}
}

// watched returns the watched connection c is, or the one under c when c
// is a TLS connection (isTLS), or nil.
func watched(c net.Conn) (wc *watchedConn, isTLS bool) {
	if tc, ok := c.(*tls.Conn); ok {
		c, isTLS = tc.NetConn(), true
	}
	wc, _ = c.(*watchedConn)
	return wc, isTLS
}

// connContext is the http.Server's ConnContext hook: it makes the watched
// connection reachable from its requests (see HandlerStarted).
func (w *Watcher) connContext(ctx context.Context, c net.Conn) context.Context {
	if wc, _ := watched(c); wc != nil {
		return context.WithValue(ctx, watchedConnKey{}, wc)
	}
	return ctx
}

// HandlerStarted records that r's header has arrived and a handler has it;
// Install's handler calls it first. A request not on a watched connection
// is left alone.
func HandlerStarted(r *http.Request) {
	if wc, ok := r.Context().Value(watchedConnKey{}).(*watchedConn); ok {
		wc.phase.Store(phaseHandler)
	}
}

type watchedConnKey struct{}

type watchedListener struct {
	net.Listener
	w *Watcher
}

// Accept returns the next connection, watched.
func (l *watchedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &watchedConn{Conn: c, w: l.w}, nil
}

// watchedConn is a client connection that counts a read timeout while a
// request header is due, once, and a response written while one is due.
type watchedConn struct {
	net.Conn
	w             *Watcher
	phase         atomic.Int32
	idleDeadlines atomic.Int32 // read deadlines set since the connection went idle
	counted       atomic.Bool
}

// Write writes to the connection. net/http writes a response while a
// header is due to refuse a request it could not read (its handlers write
// in phaseHandler): that one, a 4xx or 5xx, is counted. It also answers
// "OPTIONS *" there itself, with a 200 that refuses nothing and is not
// counted. Under TLS the first write after a request was read and before
// a handler has it is the refusal, encrypted.
func (c *watchedConn) Write(p []byte) (int, error) {
	switch c.phase.Load() {
	case phaseHeader:
		if refusal(p) {
			c.w.Refused.Inc()
		}
	case phaseRead:
		if c.phase.CompareAndSwap(phaseRead, phaseHandler) {
			c.w.Refused.Inc()
		}
	}
	return c.Conn.Write(p)
}

// SetWriteDeadline sets the connection's write deadline. crypto/tls sets
// one before the close_notify alert it writes when net/http closes a TLS
// connection without answering (a request read that ended in a read
// error): that write refuses nothing.
func (c *watchedConn) SetWriteDeadline(t time.Time) error {
	c.phase.CompareAndSwap(phaseRead, phaseHandler)
	return c.Conn.SetWriteDeadline(t)
}

// refusal reports whether p starts an HTTP/1 response whose status is an
// error (4xx or 5xx): "HTTP/1.1 400 Bad Request".
func refusal(p []byte) bool {
	const proto = "HTTP/1.x "
	return len(p) > len(proto) && bytes.HasPrefix(p, []byte("HTTP/1.")) && p[len(proto)-1] == ' ' &&
		(p[len(proto)] == '4' || p[len(proto)] == '5')
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
		c.w.HeaderTimeouts.Inc()
	}
	return n, err
}
