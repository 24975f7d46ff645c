package gateway

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// maxUpstreamHeaderBytes bounds the response header an engine may send (the
// same default as net/http's Transport).
const maxUpstreamHeaderBytes = 10 << 20

// upstreamIdleTimeout is how long an idle upstream connection is kept.
const upstreamIdleTimeout = 90 * time.Second

// errUpstreamHeaderTooLarge is returned for a response header above
// maxUpstreamHeaderBytes.
var errUpstreamHeaderTooLarge = errors.New("gateway: the engine's response header is too large")

// aLongTimeAgo is a deadline in the past: setting it unblocks a pending read
// or write at once.
var aLongTimeAgo = time.Unix(1, 0)

// upstreamTransport is the Handler's own HTTP/1.1 client for the engines. It
// does what net/http's Transport does for a gateway's plain-HTTP keep-alive
// traffic, with the request written and the response read on the calling
// goroutine: the Transport hands every request to a writer goroutine and
// every response over from a reader goroutine per connection, and at
// hundreds of concurrent requests those goroutine switches and channel
// operations cost the gateway more CPU than its own work. Connections are
// kept per engine in a LIFO stack (up to idlePerHost), checked for a close by
// the engine before reuse, and dropped after upstreamIdleTimeout idle. A
// request that finds its reused connection closed by the engine before any
// response byte is sent once more on a new connection. net/http's Transport
// resends only idempotent requests there; the gateway resends its POSTs too,
// because the client has received nothing yet and the usual cause is an
// engine closing an idle keep-alive connection as the request went out. An
// engine that read the request and then died without a byte of answer is
// sent it again, which costs one duplicate inference and nothing else.
// Other schemes (https) go to a net/http Transport.
//
// Warm-ahead: a pool only grows when a request finds it empty and dials, so
// without more the pools follow the highest number of simultaneous requests
// each engine has seen, and every new high costs requests a dial. When a
// request to an engine finds it with fewer open connections (idle or in
// use) than the gateway's peak of inference requests in flight (the
// Handler's, which raises peak: all engines' together, the most one engine
// can get), a warmer goroutine dials the difference in the background,
// within idlePerHost. Once that peak has been seen, a request at that
// concurrency finds an idle connection. An engine that closes idle connections itself (a keep-alive
// timeout shorter than the gateway's; uvicorn's default is 5 s) is not
// warmed for upstreamIdleTimeout after it last did: its warmed connections
// would only be closed and dialed again.
//
// A warmed connection waits apart from the stack, in fresh, and the next
// request to its engine takes it before any connection on the stack. On
// the stack it would sink under the connections that requests in flight
// give back after it was pooled, and wait unused for as long as the
// engine's concurrency stays below its depth; but an engine may close a
// connection that has carried no request after a timeout of its own, which
// runs from the accept, while it keeps one that has carried a request: a
// Go net/http server's ReadHeaderTimeout (the simulated engine's is 10 s)
// does. A warmed connection that sank would be found closed at the next
// peak, dropped and dialed again by a request that waits for it, and would
// stop the engine's warming for upstreamIdleTimeout.
//
// Ownership: idle, fresh, open, warming, peerClosedAt and dialed belong to
// mu; busy and peak are atomics; a warmer goroutine owns the connections it
// dials until it puts them in the pool; close stops the warmers and waits
// for them.
type upstreamTransport struct {
	dialer      net.Dialer
	idlePerHost int
	maxHeader   int64 // bytes of a response header (1xx included)

	mu           sync.Mutex
	idle         map[string][]*upConn // by host:port, most recently used last
	fresh        map[string][]*upConn // by host:port, warmed and yet unused, oldest first
	open         map[string]int       // connections per host:port, idle or in use
	warming      map[string]bool      // a warmer runs for host:port
	warmDial     map[string]*warmDial // the warmer's dial in progress for host:port
	peerClosedAt map[string]time.Time // when the engine last closed an idle connection
	dialed       map[string]dialCount // connections dialed per host:port since it last had none open
	stopped      bool                 // close came: no more warmers

	busy, peak atomic.Int64 // requests in flight (RoundTrip to body end); their peak, or the Handler's
	dials      atomic.Int64 // connections dialed, warmed ones included
	waited     atomic.Int64 // of which dialed by a request, which waited for it

	warmCtx  context.Context // cancelled by close: stops the warmers' dials
	warmStop context.CancelFunc
	warmers  sync.WaitGroup

	fallbackOnce sync.Once
	fallback     atomic.Pointer[http.Transport]
}

func newUpstreamTransport(idlePerHost int) *upstreamTransport {
	ctx, stop := context.WithCancel(context.Background())
	return &upstreamTransport{
		dialer:       net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second},
		idlePerHost:  idlePerHost,
		maxHeader:    maxUpstreamHeaderBytes,
		idle:         map[string][]*upConn{},
		fresh:        map[string][]*upConn{},
		open:         map[string]int{},
		warming:      map[string]bool{},
		warmDial:     map[string]*warmDial{},
		peerClosedAt: map[string]time.Time{},
		dialed:       map[string]dialCount{},
		warmCtx:      ctx,
		warmStop:     stop,
	}
}

// dialCount counts the connections dialed to one engine: all of them, and
// those a request dialed (and waited for).
type dialCount struct{ dials, waited int64 }

// upConn is one keep-alive connection to an engine.
type upConn struct {
	key       string
	c         net.Conn
	lim       limitedConn
	br        *bufio.Reader
	bw        *bufio.Writer
	peek      *peeker
	reused    bool
	idleSince time.Time
	dropped   atomic.Bool // closed and no longer counted in open
}

// limitedConn reads from a connection, at most n bytes while n >= 0 (the
// response header's bound).
type limitedConn struct {
	c net.Conn
	n int64
}

func (l *limitedConn) Read(p []byte) (int, error) {
	if l.n < 0 {
		return l.c.Read(p)
	}
	if l.n == 0 {
		return 0, errUpstreamHeaderTooLarge
	}
	if int64(len(p)) > l.n {
		p = p[:l.n]
	}
	n, err := l.c.Read(p)
	l.n -= int64(n)
	return n, err
}

// RoundTrip sends req and returns the engine's response. The request body is
// written and closed before RoundTrip returns.
func (t *upstreamTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme != "http" {
		return t.fallbackTransport().RoundTrip(req)
	}
	key := req.URL.Host
	if _, _, err := net.SplitHostPort(key); err != nil {
		key = net.JoinHostPort(req.URL.Hostname(), "80")
	}
	ctx := req.Context()
	if b := t.busy.Add(1); b > t.peak.Load() {
		t.raisePeak(b)
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
		if !retry || attempt > 0 || req.GetBody == nil || ctx.Err() != nil {
			t.busy.Add(-1)
			closeBody(req)
			return nil, err
		}
		// The engine closed the reused connection before answering: send the
		// request again, on a new connection (get dials when the pool holds
		// only connections the engine closed too).
		body, gerr := req.GetBody()
		if gerr != nil {
			t.busy.Add(-1)
			return nil, err
		}
		req = req.Clone(ctx)
		req.Body = body
	}
}

func closeBody(req *http.Request) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
}

// exchange writes req on pc and reads the response header. retry reports an
// error that happened on a reused connection before any response byte: the
// engine closed it while idle.
func (t *upstreamTransport) exchange(ctx context.Context, pc *upConn, req *http.Request) (resp *http.Response, retry bool, err error) {
	stop := func() bool { return true }
	if ctx.Done() != nil {
		c := pc.c
		stop = context.AfterFunc(ctx, func() { _ = c.SetDeadline(aLongTimeAgo) })
	}
	fail := func(err error, retry bool) (*http.Response, bool, error) {
		stop()
		t.drop(pc)
		if ctx.Err() != nil {
			return nil, false, context.Cause(ctx)
		}
		return nil, retry && pc.reused, err
	}
	werr := req.Write(pc.bw)
	if werr == nil {
		werr = pc.bw.Flush()
	}
	if werr != nil {
		if !pc.reused && ctx.Err() == nil {
			// The engine may have answered (an early 4xx) and stopped
			// reading: that answer is worth more than the write error.
			_ = pc.c.SetReadDeadline(time.Now().Add(100 * time.Millisecond)) // a socket deadline: wall time
			if resp, _, rerr := t.readResponse(pc, req); rerr == nil {
				resp.Close = true
				resp.Body = &upBody{rc: resp.Body, t: t, pc: pc, stop: stop, keep: false}
				return resp, false, nil
			}
		}
		return fail(fmt.Errorf("writing the request: %w", werr), true)
	}
	resp, got, rerr := t.readResponse(pc, req)
	if rerr != nil {
		// Nothing came back: the engine closed the connection (a FIN reads
		// as an unexpected EOF of the status line, an RST as a reset).
		closed := errors.Is(rerr, io.ErrUnexpectedEOF) || errors.Is(rerr, io.EOF) || errors.Is(rerr, syscall.ECONNRESET)
		return fail(rerr, got == 0 && closed)
	}
	resp.Body = &upBody{rc: resp.Body, t: t, pc: pc, stop: stop, keep: !resp.Close && !req.Close}
	return resp, false, nil
}

// readResponse reads the response header of req (skipping informational 1xx
// answers other than 101), within t.maxHeader bytes; got is how many bytes
// came from the connection (a pooled connection has none buffered).
func (t *upstreamTransport) readResponse(pc *upConn, req *http.Request) (resp *http.Response, got int64, err error) {
	pc.lim.n = t.maxHeader
	defer func() { got, pc.lim.n = t.maxHeader-pc.lim.n, -1 }()
	for range 8 {
		resp, err := http.ReadResponse(pc.br, req)
		if err != nil {
			return nil, 0, err
		}
		if resp.StatusCode >= 100 && resp.StatusCode < 200 && resp.StatusCode != http.StatusSwitchingProtocols {
			continue
		}
		return resp, 0, nil
	}
	return nil, 0, errors.New("gateway: engine sent more than 8 informational responses")
}

// upBody is a response body: reading it to the end puts its connection back
// in the pool; closing it earlier, a read error or a cancelled request
// closes the connection.
type upBody struct {
	rc     io.ReadCloser
	t      *upstreamTransport
	pc     *upConn
	stop   func() bool // stops the context's deadline poke; false if it ran
	keep   bool        // the connection may be reused once the body is read
	done   atomic.Bool // the connection is released
	closed atomic.Bool
	err    error // the first read error, returned again by later reads (Read's goroutine only)
}

func (b *upBody) Read(p []byte) (int, error) {
	if b.closed.Load() {
		return 0, http.ErrBodyReadAfterClose
	}
	if b.err != nil {
		// The connection may already serve another request: never read
		// it again.
		return 0, b.err
	}
	n, err := b.rc.Read(p)
	if err != nil {
		b.err = err
		b.finish(err == io.EOF)
	}
	return n, err
}

func (b *upBody) Close() error {
	b.closed.Store(true)
	b.finish(b.rc == http.NoBody)
	return nil
}

// finish releases the connection once: to the pool when complete is true and
// the connection is reusable, else closed.
func (b *upBody) finish(complete bool) {
	if b.done.Swap(true) {
		return
	}
	ran := !b.stop()
	b.t.busy.Add(-1)
	if complete && b.keep && !ran && b.pc.br.Buffered() == 0 {
		b.t.put(b.pc, false)
		return
	}
	b.t.drop(b.pc)
}

// raisePeak records b requests in flight (the transport's, or the
// Handler's inference requests) as the peak when it is one.
func (t *upstreamTransport) raisePeak(b int64) {
	for {
		p := t.peak.Load()
		if b <= p || t.peak.CompareAndSwap(p, b) {
			return
		}
	}
}

// drop closes pc, which leaves the count of its engine's open connections.
func (t *upstreamTransport) drop(pc *upConn) {
	if pc.dropped.Swap(true) {
		return
	}
	_ = pc.c.Close()
	t.mu.Lock()
	t.closedLocked(pc.key)
	t.mu.Unlock()
}

// closedLocked counts one connection to key less (closed, or a dial that
// failed); the engine's entries go once it has none, so that engines gone
// from the fleet leave nothing behind. t.mu is held.
func (t *upstreamTransport) closedLocked(key string) {
	if t.open[key]--; t.open[key] <= 0 {
		delete(t.open, key)
		delete(t.dialed, key)
	}
}

// get returns an idle connection to key that the engine has not closed (a
// warmed one first, see upstreamTransport), or a new one; when the engine
// has fewer open connections than the peak of requests in flight, it starts
// the engine's warmer (see upstreamTransport). A request that finds none
// while the warmer is dialing, and no other request waits for that dial,
// waits for it instead of dialing one more.
func (t *upstreamTransport) get(ctx context.Context, key string) (*upConn, error) {
	now := time.Now() // wall time: the idle limit races the engine's own keep-alive timer
	for {
		t.mu.Lock()
		pc := t.takeLocked(key)
		if pc == nil {
			wd := t.warmDial[key]
			if wd == nil || wd.claimed {
				break // t.mu held
			}
			wd.claimed = true
			t.mu.Unlock()
			select {
			case <-wd.done:
				continue
			case <-ctx.Done():
				return nil, context.Cause(ctx)
			}
		}
		t.warmLocked(key, now) // below the peak: the next requests would dial
		t.mu.Unlock()
		if now.Sub(pc.idleSince) < upstreamIdleTimeout {
			if !pc.peek.peerClosed() {
				pc.reused = true
				return pc, nil
			}
			t.mu.Lock()
			t.peerClosedAt[key] = now
			t.mu.Unlock()
		}
		t.drop(pc)
	}
	t.open[key]++ // counted before the dial, so that a warmer does not dial it too
	t.warmLocked(key, now)
	t.mu.Unlock()
	t.waited.Add(1)
	pc, err := t.dial(ctx, key)
	t.mu.Lock()
	if err != nil {
		t.closedLocked(key)
		t.mu.Unlock()
		return nil, err
	}
	t.countDialLocked(key, true)
	t.mu.Unlock()
	return pc, nil
}

// countDialLocked counts a connection dialed to key (by a request that
// waited for it when waited). t.mu is held.
func (t *upstreamTransport) countDialLocked(key string, waited bool) {
	n := t.dialed[key]
	n.dials++
	if waited {
		n.waited++
	}
	t.dialed[key] = n
}

// takeLocked takes key's oldest warmed connection that has carried no
// request yet, else its most recently used idle one, else returns nil. t.mu
// is held.
func (t *upstreamTransport) takeLocked(key string) *upConn {
	if f := t.fresh[key]; len(f) > 0 {
		pc := f[0]
		f[0] = nil
		if len(f) == 1 {
			delete(t.fresh, key) // the next warmed one starts a new slice
		} else {
			t.fresh[key] = f[1:]
		}
		return pc
	}
	s := t.idle[key]
	if len(s) == 0 {
		return nil
	}
	pc := s[len(s)-1]
	s[len(s)-1] = nil
	t.idle[key] = s[:len(s)-1]
	return pc
}

// dial opens a connection to key, not yet counted in open by dial itself.
func (t *upstreamTransport) dial(ctx context.Context, key string) (*upConn, error) {
	c, err := t.dialer.DialContext(ctx, "tcp", key)
	if err != nil {
		return nil, err
	}
	t.dials.Add(1)
	pc := &upConn{key: key, c: c, peek: newPeeker(c)}
	pc.lim = limitedConn{c: c, n: -1}
	pc.br = bufio.NewReaderSize(&pc.lim, 4<<10)
	// A prompt of thousands of tokens goes out with its header in one write
	// instead of 4 KiB chunks (one syscall each).
	pc.bw = bufio.NewWriterSize(c, 32<<10)
	return pc, nil
}

// warmLocked starts key's warmer when the engine has fewer open connections
// than the peak of requests in flight, none runs, the transport is open and
// the engine has not closed an idle connection lately. t.mu is held.
func (t *upstreamTransport) warmLocked(key string, now time.Time) {
	if t.warming[key] || t.stopped || t.open[key] >= t.warmTarget() {
		return
	}
	if at, ok := t.peerClosedAt[key]; ok && now.Sub(at) < upstreamIdleTimeout {
		return
	}
	t.warming[key] = true
	t.warmers.Add(1)
	go t.warm(key)
}

// warmDial is a warmer's dial in progress: one request whose pool is empty
// may claim it and wait for it (done closes once the connection is pooled,
// or the dial failed) instead of dialing a connection of its own. t.mu
// guards claimed.
type warmDial struct {
	done    chan struct{}
	claimed bool
}

// warmTarget is the open connections a warmer brings an engine to.
func (t *upstreamTransport) warmTarget() int { return min(int(t.peak.Load()), t.idlePerHost) }

// warm dials connections to key one at a time and puts each in its pool,
// until the engine has warmTarget open, a dial fails or close comes.
func (t *upstreamTransport) warm(key string) {
	defer t.warmers.Done()
	for {
		t.mu.Lock()
		if t.stopped || t.open[key] >= t.warmTarget() {
			delete(t.warming, key)
			t.mu.Unlock()
			return
		}
		t.open[key]++ // counted before the dial, as get does
		wd := &warmDial{done: make(chan struct{})}
		t.warmDial[key] = wd
		t.mu.Unlock()
		pc, err := t.dial(t.warmCtx, key)
		if err == nil {
			t.put(pc, true)
		}
		t.mu.Lock()
		delete(t.warmDial, key)
		if err == nil {
			t.countDialLocked(key, false)
		}
		if err != nil {
			t.closedLocked(key)
			delete(t.warming, key)
		}
		t.mu.Unlock()
		close(wd.done) // the request waiting for this dial looks again
		if err != nil {
			return
		}
	}
}

// put returns pc to the pool (to fresh when warmed is true: a warmer dialed
// it and it has carried no request), or closes it when the pool of its
// engine is full. Connections idle past upstreamIdleTimeout at the bottom of
// the stack or the head of fresh are closed on the way.
func (t *upstreamTransport) put(pc *upConn, warmed bool) {
	now := time.Now() // wall time, as in get
	pc.idleSince = now
	var stale []*upConn
	t.mu.Lock()
	s, f := t.idle[pc.key], t.fresh[pc.key]
	s, stale = pruneStale(s, now, stale)
	f, stale = pruneStale(f, now, stale)
	full := len(s)+len(f) >= t.idlePerHost
	if !full && warmed {
		f = append(f, pc)
	} else if !full {
		s = append(s, pc)
	}
	t.idle[pc.key] = s
	if len(f) > 0 {
		t.fresh[pc.key] = f
	} else {
		delete(t.fresh, pc.key)
	}
	t.mu.Unlock()
	for _, c := range stale {
		t.drop(c)
	}
	if full {
		t.drop(pc)
	}
}

// pruneStale moves the connections at the head of s (oldest first) that have
// been idle for upstreamIdleTimeout to stale.
func pruneStale(s []*upConn, now time.Time, stale []*upConn) ([]*upConn, []*upConn) {
	i := 0
	for i < len(s) && now.Sub(s[i].idleSince) >= upstreamIdleTimeout {
		i++
	}
	if i == 0 {
		return s, stale
	}
	stale = append(stale, s[:i]...)
	n := copy(s, s[i:])
	clear(s[n:])
	return s[:n], stale
}

// CloseIdleConnections closes every idle connection (the pool stays usable).
func (t *upstreamTransport) CloseIdleConnections() {
	t.mu.Lock()
	idle, fresh := t.idle, t.fresh
	t.idle, t.fresh = map[string][]*upConn{}, map[string][]*upConn{}
	t.mu.Unlock()
	for _, m := range []map[string][]*upConn{idle, fresh} {
		for _, s := range m {
			for _, pc := range s {
				t.drop(pc)
			}
		}
	}
	if f := t.fallback.Load(); f != nil {
		f.CloseIdleConnections()
	}
}

// close stops the warmers, waits for them and closes every idle
// connection. Requests in flight finish; their connections are pooled as
// before, and CloseIdleConnections closes them.
func (t *upstreamTransport) close() {
	t.mu.Lock()
	t.stopped = true
	t.mu.Unlock()
	t.warmStop()
	t.warmers.Wait()
	t.CloseIdleConnections()
}

// dialedTo returns the connections dialed to each engine (by its
// host:port) since it last had none open.
func (t *upstreamTransport) dialedTo() map[string]dialCount {
	t.mu.Lock()
	defer t.mu.Unlock()
	return maps.Clone(t.dialed)
}

// idleConns returns the number of idle connections to key, warmed ones
// included.
func (t *upstreamTransport) idleConns(key string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.idle[key]) + len(t.fresh[key])
}

func (t *upstreamTransport) fallbackTransport() *http.Transport {
	t.fallbackOnce.Do(func() { t.fallback.Store(newTransport(t.idlePerHost)) })
	return t.fallback.Load()
}
