package testport

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"syscall"
	"testing"
)

// listenAttempts bounds the ports Listen tries when each is taken between
// Find's check and Listen's bind.
const listenAttempts = 10

// Listen returns a TCP listener on host (a loopback address such as
// 127.0.0.1) at a port outside the ephemeral range, for a server a test
// stops while its address is still dialled: a client that must then be
// refused, or one that waits for the server to come back. Once the server
// is closed no other socket's bind to port 0 can take the port and answer
// in its place, as it can take a port from a bind to port 0. The listener
// holds its port from the start; a port taken between Find's check and the
// bind is given up for another. The listener is closed when t ends, if the
// test has not closed it by then.
func Listen(t testing.TB, host string) net.Listener {
	t.Helper()
	l, err := std.listen(host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// listen binds a port from find on host, drawing another while the one
// found is already in use when bound.
func (f *finder) listen(host string) (net.Listener, error) {
	bind := f.bind
	if bind == nil {
		bind = net.Listen
	}
	var last error
	for range listenAttempts {
		p, err := f.find(Options{Hosts: []string{host}})
		if err != nil {
			return nil, err
		}
		l, err := bind("tcp", net.JoinHostPort(host, strconv.Itoa(p)))
		if err == nil {
			return l, nil
		}
		if !errors.Is(err, syscall.EADDRINUSE) {
			return nil, err
		}
		last = err
	}
	return nil, fmt.Errorf("testport: every port found on %s was taken before it was bound, %d times: %w", host, listenAttempts, last)
}
