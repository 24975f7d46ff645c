//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package h1pool

import (
	"net"
	"syscall"
)

// peeker checks an idle connection for a close by the server with one
// non-blocking peek at its socket, so that a connection the server closed
// while idle is not used for a request. It is made once per connection:
// the check allocates nothing.
type peeker struct {
	rc     syscall.RawConn // nil: the connection has no socket to peek at
	closed bool
	fn     func(fd uintptr) bool
}

func newPeeker(c net.Conn) *peeker {
	p := &peeker{}
	if sc, ok := c.(syscall.Conn); ok {
		if rc, err := sc.SyscallConn(); err == nil {
			p.rc = rc
		}
	}
	p.fn = p.peek
	return p
}

func (p *peeker) peek(fd uintptr) bool {
	var b [1]byte
	_, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	// EAGAIN: nothing to read, the connection is open. Anything else is an
	// error, the server's FIN (0 bytes) or bytes nobody asked for.
	p.closed = err != syscall.EAGAIN && err != syscall.EWOULDBLOCK && err != syscall.EINTR
	return true // never wait for readability
}

// peerClosed reports whether the server has closed (or written unasked to)
// the idle connection.
func (p *peeker) peerClosed() bool {
	if p.rc == nil {
		return false
	}
	p.closed = false
	if err := p.rc.Read(p.fn); err != nil {
		return true
	}
	return p.closed
}
