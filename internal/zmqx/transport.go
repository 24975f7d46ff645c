package zmqx

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/go-zeromq/zmq4/transport"
)

// Scheme is the go-zeromq transport name of the guarded TCP transport. Sockets
// dial and listen on "tcpx://host:port" (see Endpoint) to get the handshake
// and idle deadlines and the frame-size guard of the Options carried by the
// socket's context (WithOptions).
const Scheme = "tcpx"

// registerErr is non-nil when the Scheme name was already taken in this
// process by someone else; every helper then returns it.
var registerErr = zmq4.RegisterTransport(Scheme, guardTransport{inner: transport.New("tcp")})

// Endpoint turns "host:port", "tcp://host:port" or "tcpx://host:port" into the
// guarded endpoint "tcpx://host:port". Other schemes (ipc, inproc) are
// rejected: kvroute talks to engines over TCP only.
func Endpoint(addr string) (string, error) {
	if registerErr != nil {
		return "", fmt.Errorf("zmqx: guarded transport unavailable: %w", registerErr)
	}
	hostport := addr
	if i := strings.Index(addr, "://"); i >= 0 {
		switch scheme := addr[:i]; scheme {
		case "tcp", Scheme:
			hostport = addr[i+3:]
		default:
			return "", fmt.Errorf("zmqx: unsupported scheme %q in %q (tcp only)", scheme, addr)
		}
	}
	_, port, err := net.SplitHostPort(hostport)
	if err != nil {
		return "", fmt.Errorf("zmqx: bad address %q: %w", addr, err)
	}
	// ZeroMQ's tcp addresses take a numeric port; one past 65535 (a
	// configured port plus a data-parallel rank, say) would otherwise fail
	// only at every dial.
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return "", fmt.Errorf("zmqx: bad address %q: port %q is not a number in [0, 65535]", addr, port)
	}
	return Scheme + "://" + hostport, nil
}

// guardTransport is the go-zeromq transport behind Scheme.
type guardTransport struct {
	inner transport.Transport
}

// dialHookKey carries, in a socket's context, a function that
// guardTransport.Dial calls with the outcome of every TCP dial attempt and
// whose result it goes on with, so that a test can count go-zeromq's attempts
// (a refused port has no listener to count them) and watch the deadlines the
// guard sets on the connection. Nothing outside this package's tests sets it.
type dialHookKey struct{}

// Dial connects over TCP within Options.DialTimeout and wraps the connection.
func (t guardTransport) Dial(ctx context.Context, d transport.Dialer, addr string) (net.Conn, error) {
	o := OptionsFrom(ctx)
	dctx := ctx
	if o.DialTimeout > 0 {
		var cancel context.CancelFunc
		dctx, cancel = context.WithTimeout(ctx, o.DialTimeout)
		defer cancel()
	}
	c, err := t.inner.Dial(dctx, d, addr)
	if hook, ok := ctx.Value(dialHookKey{}).(func(net.Conn, error) (net.Conn, error)); ok {
		c, err = hook(c, err)
	}
	if err != nil {
		return nil, err
	}
	return newSocketConn(ctx, c, o, nil), nil
}

// Listen listens on TCP and wraps every accepted connection. Accepted
// connections are handed to go-zeromq only once the peer has sent its first
// byte, so a mute client cannot block go-zeromq's single accept loop, which
// runs each handshake inline. A connection dropped before then (mute past
// the handshake deadline, closed, or beyond the connections being prepared)
// is reported to Options.OnHandshakeFailure, as a Listener reports its own.
func (t guardTransport) Listen(ctx context.Context, addr string) (net.Listener, error) {
	o := OptionsFrom(ctx)
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	return newAcceptor(ctx, l, o.Clock, func(ctx context.Context, c net.Conn) (net.Conn, error) {
		b, err := readFirstByte(c, o)
		if err != nil {
			return nil, err
		}
		return newSocketConn(ctx, c, o, b), nil
	}, closeNetConn, o.OnHandshakeFailure), nil
}

// Addr normalises "host:port" like the tcp transport does.
func (t guardTransport) Addr(ep string) (string, error) { return t.inner.Addr(ep) }

func closeNetConn(c net.Conn) { _ = c.Close() }

// readFirstByte waits, within the handshake deadline, for the peer to start
// its greeting. Both libzmq and go-zeromq send their signature without waiting
// for the other side, so a peer that sends nothing is mute.
func readFirstByte(c net.Conn, o Options) ([]byte, error) {
	if o.HandshakeTimeout > 0 {
		_ = c.SetReadDeadline(time.Now().Add(o.HandshakeTimeout)) // a socket deadline: wall time
	}
	var b [1]byte
	if _, err := c.Read(b[:]); err != nil {
		return nil, err
	}
	return b[:], nil
}

var _ transport.Transport = guardTransport{}
