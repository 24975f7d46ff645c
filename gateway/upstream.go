package gateway

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
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
type upstreamTransport struct {
	dialer      net.Dialer
	idlePerHost int
	maxHeader   int64 // bytes of a response header (1xx included)

	mu   sync.Mutex
	idle map[string][]*upConn // by host:port, most recently used last

	fallbackOnce sync.Once
	fallback     atomic.Pointer[http.Transport]
}

func newUpstreamTransport(idlePerHost int) *upstreamTransport {
	return &upstreamTransport{
		dialer:      net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second},
		idlePerHost: idlePerHost,
		maxHeader:   maxUpstreamHeaderBytes,
		idle:        map[string][]*upConn{},
	}
}

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
	for attempt := 0; ; attempt++ {
		if err := ctx.Err(); err != nil {
			closeBody(req)
			return nil, context.Cause(ctx)
		}
		pc, err := t.get(ctx, key)
		if err != nil {
			closeBody(req)
			return nil, err
		}
		resp, retry, err := t.exchange(ctx, pc, req)
		if err == nil {
			return resp, nil
		}
		if !retry || attempt > 0 || req.GetBody == nil || ctx.Err() != nil {
			closeBody(req)
			return nil, err
		}
		// The engine closed the reused connection before answering: send the
		// request again, on a new connection (get dials when the pool holds
		// only connections the engine closed too).
		body, gerr := req.GetBody()
		if gerr != nil {
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
		_ = pc.c.Close()
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
	if complete && b.keep && !ran && b.pc.br.Buffered() == 0 {
		b.t.put(b.pc)
		return
	}
	_ = b.pc.c.Close()
}

// get returns an idle connection to key that the engine has not closed, or a
// new one.
func (t *upstreamTransport) get(ctx context.Context, key string) (*upConn, error) {
	now := time.Now() // wall time: the idle limit races the engine's own keep-alive timer
	for {
		t.mu.Lock()
		s := t.idle[key]
		if len(s) == 0 {
			t.mu.Unlock()
			break
		}
		pc := s[len(s)-1]
		s[len(s)-1] = nil
		t.idle[key] = s[:len(s)-1]
		t.mu.Unlock()
		if now.Sub(pc.idleSince) < upstreamIdleTimeout && !pc.peek.peerClosed() {
			pc.reused = true
			return pc, nil
		}
		_ = pc.c.Close()
	}
	c, err := t.dialer.DialContext(ctx, "tcp", key)
	if err != nil {
		return nil, err
	}
	pc := &upConn{key: key, c: c, peek: newPeeker(c)}
	pc.lim = limitedConn{c: c, n: -1}
	pc.br = bufio.NewReaderSize(&pc.lim, 4<<10)
	// A prompt of thousands of tokens goes out with its header in one write
	// instead of 4 KiB chunks (one syscall each).
	pc.bw = bufio.NewWriterSize(c, 32<<10)
	return pc, nil
}

// put returns pc to the pool, or closes it when the pool of its engine is
// full. Connections idle past upstreamIdleTimeout at the bottom of the stack
// are closed on the way.
func (t *upstreamTransport) put(pc *upConn) {
	now := time.Now() // wall time, as in get
	pc.idleSince = now
	var stale []*upConn
	t.mu.Lock()
	s := t.idle[pc.key]
	i := 0
	for i < len(s) && now.Sub(s[i].idleSince) >= upstreamIdleTimeout {
		i++
	}
	if i > 0 {
		stale = append(stale, s[:i]...)
		s = append(s[:0], s[i:]...)
	}
	full := len(s) >= t.idlePerHost
	if !full {
		s = append(s, pc)
	}
	t.idle[pc.key] = s
	t.mu.Unlock()
	for _, c := range stale {
		_ = c.c.Close()
	}
	if full {
		_ = pc.c.Close()
	}
}

// CloseIdleConnections closes every idle connection (the pool stays usable).
func (t *upstreamTransport) CloseIdleConnections() {
	t.mu.Lock()
	idle := t.idle
	t.idle = map[string][]*upConn{}
	t.mu.Unlock()
	for _, s := range idle {
		for _, pc := range s {
			_ = pc.c.Close()
		}
	}
	if f := t.fallback.Load(); f != nil {
		f.CloseIdleConnections()
	}
}

// idleConns returns the number of idle connections to key.
func (t *upstreamTransport) idleConns(key string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.idle[key])
}

func (t *upstreamTransport) fallbackTransport() *http.Transport {
	t.fallbackOnce.Do(func() { t.fallback.Store(newTransport(t.idlePerHost)) })
	return t.fallback.Load()
}
