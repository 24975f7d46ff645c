package h1pool

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/kvroute/kvroute/telemetry"
)

// Defaults of the Config fields left zero.
const (
	// DefaultMaxIdlePerHost is the idle connections kept per host.
	DefaultMaxIdlePerHost = 1024
	// DefaultIdleTimeout is how long an idle connection is kept.
	DefaultIdleTimeout = 90 * time.Second
	// DefaultPeakWindow is the window of the warm-ahead's peak: a peak of
	// requests in flight is forgotten one to two windows after it was last
	// reached, and a host that got no request for a window is no longer
	// kept warm.
	DefaultPeakWindow = 5 * time.Minute
	// DefaultMaxHeaderBytes bounds a response header (net/http's default).
	DefaultMaxHeaderBytes = 10 << 20
	// DefaultReadBufferSize is the read buffer per connection.
	DefaultReadBufferSize = 4 << 10
	// DefaultWriteBufferSize is the write buffer per connection: a request
	// of thousands of tokens goes out with its header in one write instead
	// of 4 KiB chunks (one system call each).
	DefaultWriteBufferSize = 32 << 10
)

// ErrHeaderTooLarge is returned for a response header above
// Config.MaxHeaderBytes.
var ErrHeaderTooLarge = errors.New("h1pool: the server's response header is too large")

// errSwitchingProtocols is returned for a 101 Switching Protocols answer:
// the connection then speaks another protocol, which the Transport does not
// hand over (kvroute's clients never ask for an upgrade), so it is closed,
// never pooled.
var errSwitchingProtocols = errors.New("h1pool: the server switched protocols (101), which is not supported")

// errNoFallback is returned for a request whose scheme is not http when
// Config.Fallback is nil.
var errNoFallback = errors.New("h1pool: only http URLs are served (no fallback transport for other schemes)")

// earlyAnswerWait is how long a request whose write failed on a new
// connection waits for the header of an answer the server may have sent
// before it stopped reading (an early 413): worth more than the write
// error, when it is there.
const earlyAnswerWait = 100 * time.Millisecond

// aLongTimeAgo is a deadline in the past: setting it unblocks a pending read
// or write at once.
var aLongTimeAgo = time.Unix(1, 0)

// Config sets up a Transport; zero fields take the defaults above.
type Config struct {
	// MaxIdlePerHost caps the idle connections kept per host:port; a
	// connection given back to a full pool is closed (CloseIdle).
	MaxIdlePerHost int
	// MaxConnsPerHost caps the connections per host:port, idle or in use
	// (0: no cap). A request that finds the host at the cap with no idle
	// connection waits, first come first served, for one to be given back
	// or closed, or for its context to end.
	MaxConnsPerHost int
	// IdleTimeout is how long an idle connection is kept, but for the
	// connections that WarmAhead keeps, which stay however long they are
	// idle. A sweep closes the others within about 1.5 × IdleTimeout (at
	// least a second) even when no request comes to their host: an engine
	// removed from the pool does not keep its connections (see sweep.go).
	IdleTimeout time.Duration
	// PeakWindow is how long WarmAhead remembers a peak of requests in
	// flight: the warmers bring each host to the highest number of requests
	// in flight seen in the current window or the one before, and keep the
	// connections of a host only while it got a request within the last
	// window. So after a burst the pools shrink back, one to two windows
	// later, to what the traffic since needs, instead of holding the
	// burst's connections (buffers on both sides) until the engines close
	// them. Zero is DefaultPeakWindow; negative keeps every peak forever.
	PeakWindow time.Duration
	// Clock times the idle timeout, the sweep and the peak's window; nil is
	// the wall clock (which the idle timeout races: the server's own
	// keep-alive timer runs on it).
	Clock telemetry.Clock
	// MaxHeaderBytes bounds a response header, informational answers
	// included.
	MaxHeaderBytes int64
	// ReadBufferSize and WriteBufferSize are the buffers per connection.
	ReadBufferSize, WriteBufferSize int
	// Dialer dials the connections; nil is a dialer with a 5 s timeout and
	// 30 s TCP keep-alive. A request's context also bounds its dial.
	Dialer *net.Dialer
	// Fallback serves requests whose scheme is not http (https: TLS is
	// left to net/http); nil fails them. CloseIdleConnections reaches it
	// when it has that method.
	Fallback http.RoundTripper
	// WarmAhead dials ahead, in the background, to the peak of requests in
	// flight, and keeps that many connections per host past IdleTimeout
	// (see warm.go); off, a pool grows only by the requests that find it
	// empty.
	WarmAhead bool
	// OnDial, when set, is called after each connection dialed (warmed ones
	// included), and OnClose after each connection closed, with why; both
	// on the goroutine that dialed or closed it, so they must be quick (a
	// counter's increment).
	OnDial  func()
	OnClose func(CloseReason)
}

// Transport is an HTTP/1.1 keep-alive client transport that writes each
// request and reads its response on the calling goroutine. See the package
// documentation for what it does and why.
//
// Ownership: idle, fresh, open, waiting, warming, warmDial, peerClosedAt,
// dialed, lastUse, forgotten, winStart, sweepTimer and stopped belong to
// mu; busy, peak, peakPrev and the counters are atomics; a connection
// belongs to the request that took it from the pool (or dialed it) until
// its response body ends, and to a warmer goroutine from its dial until the
// warmer pools it; the sweep runs on a Clock timer's goroutine under mu.
// Close stops the warmers and the sweep and waits for them.
type Transport struct {
	cfg    Config
	dialer *net.Dialer

	mu           sync.Mutex
	idle         map[string][]*conn      // by host:port, most recently used last
	fresh        map[string][]*conn      // by host:port, warmed and yet unused, oldest first
	open         map[string]int          // connections per host:port, idle, in use or being dialed
	waiting      map[string][]chan *conn // requests waiting at MaxConnsPerHost, first come first
	warming      map[string]bool         // a warmer runs for host:port
	warmDial     map[string]*warmDial    // the warmer's dial in progress for host:port
	peerClosedAt map[string]time.Time    // when the server last closed an idle connection
	dialed       map[string]DialCount    // connections dialed per host:port since it last had none open
	lastUse      map[string]time.Time    // a request's last get per host:port, while it has connections open
	forgotten    map[string]bool         // hosts Retain left out, until a request comes to them or none is open
	winStart     time.Time               // when the peak's current window began
	sweepTimer   telemetry.Timer         // the pending sweep, if any
	stopped      bool                    // Close came: no more warmers nor sweeps

	clk        telemetry.Clock
	busy, peak atomic.Int64 // requests in flight (RoundTrip to body end); their peak in the current window (RaisePeak raises it too)
	peakPrev   atomic.Int64 // the peak of the window before
	sweeps     sync.WaitGroup
	dials      atomic.Int64 // connections dialed, warmed ones included
	waited     atomic.Int64 // of which dialed by a request, which waited for it
	resends    atomic.Int64 // requests sent again after their reused connection closed unanswered
	closes     [numCloseReasons]atomic.Int64

	warmCtx  context.Context // cancelled by Close: stops the warmers' dials
	warmStop context.CancelFunc
	warmers  sync.WaitGroup
}

// New returns a Transport configured by cfg.
func New(cfg Config) *Transport {
	if cfg.MaxIdlePerHost <= 0 {
		cfg.MaxIdlePerHost = DefaultMaxIdlePerHost
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = DefaultIdleTimeout
	}
	if cfg.PeakWindow == 0 {
		cfg.PeakWindow = DefaultPeakWindow
	}
	clk := cfg.Clock
	if clk == nil {
		clk = telemetry.Wall
	}
	if cfg.MaxHeaderBytes <= 0 {
		cfg.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	if cfg.ReadBufferSize <= 0 {
		cfg.ReadBufferSize = DefaultReadBufferSize
	}
	if cfg.WriteBufferSize <= 0 {
		cfg.WriteBufferSize = DefaultWriteBufferSize
	}
	d := cfg.Dialer
	if d == nil {
		d = &net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}
	}
	ctx, stop := context.WithCancel(context.Background())
	return &Transport{
		cfg:          cfg,
		dialer:       d,
		idle:         map[string][]*conn{},
		fresh:        map[string][]*conn{},
		open:         map[string]int{},
		waiting:      map[string][]chan *conn{},
		warming:      map[string]bool{},
		warmDial:     map[string]*warmDial{},
		peerClosedAt: map[string]time.Time{},
		dialed:       map[string]DialCount{},
		lastUse:      map[string]time.Time{},
		forgotten:    map[string]bool{},
		winStart:     clk.Now(),
		clk:          clk,
		warmCtx:      ctx,
		warmStop:     stop,
	}
}

// RoundTrip sends req and returns the server's response. The request body
// is written and closed before RoundTrip returns. A reused connection that
// the server closed before any byte of answer is retried once on a new
// connection, whatever the method, when the request can be sent again: it
// has no body (nil or http.NoBody) or req.GetBody is set (as net/http's
// Transport decides); the caller has received nothing yet, and the usual
// cause is a server closing an idle keep-alive connection as the request
// went out. Of the request's
// httptrace.ClientTrace only WroteRequest is called, by http.Request.Write
// on the caller's goroutine once the request is in the connection's write
// buffer, just before its last flush (as with net/http's Transport).
//
// The response body must be read to its end or closed: reading it to its
// end gives the connection back to the pool on the reading goroutine,
// before the last Read returns; closing it earlier, a read error or the
// request's context ending closes the connection. A 101 Switching
// Protocols answer is an error, its connection closed: the Transport does
// not hand an upgraded connection over, and never pools one.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme != "http" {
		if t.cfg.Fallback == nil {
			closeBody(req)
			return nil, errNoFallback
		}
		return t.cfg.Fallback.RoundTrip(req)
	}
	key := hostKey(req.URL)
	ctx := req.Context()
	if b := t.busy.Add(1); b > t.peak.Load() {
		t.RaisePeak(b)
	}
	for attempt := 0; ; attempt++ {
		if err := ctx.Err(); err != nil {
			t.busy.Add(-1)
			closeBody(req)
			return nil, context.Cause(ctx)
		}
		pc, err := t.get(ctx, key)
		if err != nil {
			t.busy.Add(-1)
			closeBody(req)
			return nil, err
		}
		resp, retry, err := t.exchange(ctx, pc, req)
		if err == nil {
			return resp, nil // the body's end leaves busy
		}
		if !retry || attempt > 0 || !replayable(req) || ctx.Err() != nil {
			t.busy.Add(-1)
			closeBody(req)
			return nil, err
		}
		// The server closed the reused connection before answering: send
		// the request again, on a new connection (get dials when the pool
		// holds only connections the server closed too).
		if hasBody(req) {
			body, gerr := req.GetBody()
			if gerr != nil {
				t.busy.Add(-1)
				return nil, err
			}
			req = req.Clone(ctx)
			req.Body = body
		}
		t.resends.Add(1)
	}
}

// hasBody reports whether req has a body to send (neither nil nor
// http.NoBody).
func hasBody(req *http.Request) bool {
	return req.Body != nil && req.Body != http.NoBody
}

// replayable reports whether req can be sent again once written: it has no
// body, or GetBody gives it anew.
func replayable(req *http.Request) bool {
	return !hasBody(req) || req.GetBody != nil
}

func closeBody(req *http.Request) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
}

// exchange writes req on pc and reads the response header. retry reports an
// error that happened on a reused connection before any response byte: the
// server closed it while idle.
func (t *Transport) exchange(ctx context.Context, pc *conn, req *http.Request) (resp *http.Response, retry bool, err error) {
	stop := func() bool { return true }
	poked := make(chan struct{}) // closed once the context's deadline poke is done
	if ctx.Done() != nil {
		c := pc.c
		stop = context.AfterFunc(ctx, func() { _ = c.SetDeadline(aLongTimeAgo); close(poked) })
	}
	sent := pc.out.n
	fail := func(err error, closed bool) (*http.Response, bool, error) {
		stopped := stop()
		switch {
		case ctx.Err() != nil && pc.out.n == sent && errors.Is(err, os.ErrDeadlineExceeded):
			// The poke stopped the write before its first byte (another
			// write error may mean a broken connection: closed below).
			t.unsent(pc, stopped, poked)
			return nil, false, context.Cause(ctx)
		case ctx.Err() != nil:
			t.drop(pc, CloseCanceled)
			return nil, false, context.Cause(ctx)
		case closed && pc.reused:
			t.drop(pc, CloseAsked)
			return nil, true, err
		}
		t.drop(pc, CloseBroken)
		return nil, false, err
	}
	werr := req.Write(pc.bw)
	if werr == nil && ctx.Err() != nil && pc.out.n == sent {
		t.unsent(pc, stop(), poked) // still all in the buffer: nothing to abort
		return nil, false, context.Cause(ctx)
	}
	if werr == nil {
		werr = pc.bw.Flush()
	}
	if werr != nil {
		if !pc.reused && ctx.Err() == nil {
			// The server may have answered (an early 4xx) and stopped
			// reading: that answer is worth more than the write error.
			_ = pc.c.SetReadDeadline(time.Now().Add(earlyAnswerWait)) // a socket deadline: wall time
			if resp, _, rerr := t.readResponse(pc, req); rerr == nil {
				// The deadline bounded the wait for the header, not the
				// body, which the caller may read for as long as any
				// other. A context that ended meanwhile keeps its poke:
				// its AfterFunc either ran before (ctx.Err says so) or
				// runs after the clearing.
				_ = pc.c.SetReadDeadline(time.Time{})
				if ctx.Err() != nil {
					_ = pc.c.SetReadDeadline(aLongTimeAgo)
				}
				resp.Close = true
				resp.Body = &body{rc: resp.Body, t: t, pc: pc, stop: stop, keep: false}
				return resp, false, nil
			}
		}
		return fail(fmt.Errorf("writing the request: %w", werr), true)
	}
	resp, got, rerr := t.readResponse(pc, req)
	if rerr != nil {
		// Nothing came back: the server closed the connection (a FIN reads
		// as an unexpected EOF of the status line, an RST as a reset).
		closed := errors.Is(rerr, io.ErrUnexpectedEOF) || errors.Is(rerr, io.EOF) || errors.Is(rerr, syscall.ECONNRESET)
		return fail(rerr, got == 0 && closed)
	}
	resp.Body = &body{rc: resp.Body, t: t, pc: pc, stop: stop, keep: !resp.Close && !req.Close}
	return resp, false, nil
}

// unsent gives back to the pool the connection of a request whose context
// ended before any byte of it reached the connection: it is between two
// exchanges as it was when taken, so closing it (the way to abort a
// request in flight) would only cost a dial later. A render hedge's loser
// canceled as the other answer came, on a machine too busy to have run its
// write yet, is such a request. The context's deadline poke, if it ran
// (stopped is false), is waited for and cleared; what the request left in
// the write buffer is discarded.
func (t *Transport) unsent(pc *conn, stopped bool, poked <-chan struct{}) {
	if !stopped {
		<-poked
	}
	_ = pc.c.SetDeadline(time.Time{})
	pc.bw.Reset(&pc.out)
	t.put(pc, false)
}

// readResponse reads the response header of req (skipping informational 1xx
// answers), within Config.MaxHeaderBytes; got is how many bytes came from
// the connection (a pooled connection has none buffered). A 101 Switching
// Protocols is errSwitchingProtocols: what follows on the connection is no
// HTTP/1.1, and the caller, told of an error, closes it.
func (t *Transport) readResponse(pc *conn, req *http.Request) (resp *http.Response, got int64, err error) {
	limit := t.cfg.MaxHeaderBytes
	pc.lim.n = limit
	defer func() { got, pc.lim.n = limit-pc.lim.n, -1 }()
	for range 8 {
		resp, err := http.ReadResponse(pc.br, req)
		if err != nil {
			return nil, 0, err
		}
		if resp.StatusCode == http.StatusSwitchingProtocols {
			return nil, 0, errSwitchingProtocols
		}
		if resp.StatusCode >= 100 && resp.StatusCode < 200 {
			continue
		}
		return resp, 0, nil
	}
	return nil, 0, errors.New("h1pool: the server sent more than 8 informational responses")
}

// CloseIdleConnections closes every idle connection (the Transport stays
// usable), and the fallback's.
func (t *Transport) CloseIdleConnections() {
	t.mu.Lock()
	idle, fresh := t.idle, t.fresh
	t.idle, t.fresh = map[string][]*conn{}, map[string][]*conn{}
	t.mu.Unlock()
	for _, m := range []map[string][]*conn{idle, fresh} {
		for _, s := range m {
			for _, pc := range s {
				t.drop(pc, CloseIdle)
			}
		}
	}
	if f, ok := t.cfg.Fallback.(interface{ CloseIdleConnections() }); ok {
		f.CloseIdleConnections()
	}
}

// Close stops the warmers and the sweep, waits for them and closes every idle
// connection. Requests in flight finish; their connections are closed when
// given back (and a request that comes later still works, on a connection
// of its own). It is idempotent.
func (t *Transport) Close() {
	t.mu.Lock()
	t.stopped = true
	t.stopSweepLocked()
	t.mu.Unlock()
	t.warmStop()
	t.warmers.Wait()
	t.sweeps.Wait()
	t.CloseIdleConnections()
}
