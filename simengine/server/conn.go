package server

import (
	"net"
	"sync"
	"time"
)

// headerTimeout bounds the reading of a request header, from its first byte
// (net/http's ReadHeaderTimeout, applied by firstByteConn).
const headerTimeout = 10 * time.Second

// DefaultKeepAliveTimeout is Config.KeepAliveTimeout's default: how long a
// connection may stay idle after a response before the server closes it,
// vLLM's VLLM_HTTP_TIMEOUT_KEEP_ALIVE default, uvicorn's timeout_keep_alive
// (net/http's IdleTimeout, which it sets once the response is written;
// without it, and with no ReadTimeout, net/http never closes an idle
// connection).
const DefaultKeepAliveTimeout = 5 * time.Second

// firstByteListener hands out its connections as firstByteConns.
type firstByteListener struct {
	net.Listener
	timeout time.Duration
}

func (l firstByteListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &firstByteConn{Conn: c, timeout: l.timeout}, nil
}

// firstByteConn starts the header timeout of a connection's first request
// at that request's first byte, not at the accept, as vLLM's HTTP server
// (uvicorn) does: it closes a connection that has carried no request yet
// never, and one idle after a request after its keep-alive timeout.
// net/http's server sets its ReadHeaderTimeout from the accept, so a client
// that dials ahead (a gateway warming its pool) saw the connections it had
// not used yet closed 10 s later: a difference a router can tell.
//
// Before the first byte the read deadlines the server sets are not applied
// (the server's own goroutine is the only reader and setter then); the
// first read that returns bytes sets the deadline to timeout from then, and
// later deadlines pass through. mu guards started: the server sets read
// deadlines from another goroutine once a request is in progress.
type firstByteConn struct {
	net.Conn
	timeout time.Duration
	mu      sync.Mutex
	started bool
}

func (c *firstByteConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.mu.Lock()
		if !c.started {
			c.started = true
			_ = c.Conn.SetReadDeadline(time.Now().Add(c.timeout)) // the header timeout, from the first byte
		}
		c.mu.Unlock()
	}
	return n, err
}

func (c *firstByteConn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.started {
		return nil
	}
	return c.Conn.SetReadDeadline(t)
}

func (c *firstByteConn) SetDeadline(t time.Time) error {
	if err := c.SetReadDeadline(t); err != nil {
		return err
	}
	return c.Conn.SetWriteDeadline(t)
}

// CloseWrite half-closes the connection when it can (net/http's server does
// before closing a connection whose request it did not read whole).
func (c *firstByteConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
