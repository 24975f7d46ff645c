//go:build linux || darwin

package zmqx

import (
	"net"
	"syscall"
)

// unreadBytes reports whether bytes the peer sent on c wait in the kernel,
// received but not yet read. It peeks without consuming and without
// blocking, through RawConn.Control, which runs alongside a Read blocked on
// c. A connection that exposes no file descriptor (a wrapper) reports
// false.
func unreadBytes(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	var (
		b    [1]byte
		n    int
		rerr error
	)
	if err := rc.Control(func(fd uintptr) {
		n, _, rerr = syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	}); err != nil {
		return false
	}
	return rerr == nil && n > 0
}
