//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package h1pool

import "net"

// peeker cannot peek at a socket on this platform: a connection the server
// closed while idle is found out by the request, which is then sent again
// on a new connection.
type peeker struct{}

func newPeeker(net.Conn) *peeker { return &peeker{} }

func (*peeker) peerClosed() bool { return false }
