package zmqx

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"

	"github.com/go-zeromq/zmq4"
	"github.com/go-zeromq/zmq4/security/null"
)

// Listener accepts ZMTP connections for kvroute's own server sockets (the Go
// publisher's PUB side and the replay ROUTER). Unlike go-zeromq's sockets it
// runs every handshake in its own goroutine under the handshake deadline, so a
// mute or slow client delays nobody, at most maxPreparing at once (a
// connection beyond them is closed and reported to OnHandshakeFailure), and
// it starts no goroutine that Close does not stop. go-zeromq is used for the ZMTP handshake only (zmq4.Open);
// frames are then read and written by Conn directly.
type Listener struct {
	acc  *acceptor[*Conn]
	typ  zmq4.SocketType
	opts Options
}

// Listen binds addr ("host:port", "tcp://host:port" or "tcpx://host:port";
// host "*" means all interfaces, port 0 picks a free port) for sockets of type typ. Handshakes that fail are
// logged at debug level on lg (nil = discard), counted (HandshakeFailures) and
// reported to o.OnHandshakeFailure; those the listener's Close aborts are not.
// ctx bounds the listener's life: when it ends the listener is closed.
func Listen(ctx context.Context, addr string, typ zmq4.SocketType, o Options, lg *slog.Logger) (*Listener, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	ep, err := Endpoint(addr)
	if err != nil {
		return nil, err
	}
	if !knownSocketTypes[string(typ)] {
		return nil, fmt.Errorf("zmqx: unknown socket type %q", typ)
	}
	o = o.withDefaults()
	if lg == nil {
		lg = discardLogger
	}
	hostport := ep[len(Scheme)+3:]
	if host, port, _ := net.SplitHostPort(hostport); host == "*" {
		hostport = net.JoinHostPort("", port) // ZeroMQ's "all interfaces"
	}
	nl, err := net.Listen("tcp", hostport)
	if err != nil {
		return nil, fmt.Errorf("zmqx: listen %s: %w", addr, err)
	}
	l := &Listener{typ: typ, opts: o}
	l.acc = newAcceptor(ctx, nl, o.Clock, l.handshake, func(c *Conn) { _ = c.Close() }, func(a net.Addr, err error) {
		lg.Debug("ZMTP handshake failed", "remote", a.String(), "socket", string(typ), "err", err)
		if o.OnHandshakeFailure != nil {
			o.OnHandshakeFailure(a, err)
		}
	})
	return l, nil
}

func (l *Listener) handshake(ctx context.Context, nc net.Conn) (*Conn, error) {
	b, err := readFirstByte(nc, l.opts)
	if err != nil {
		return nil, err
	}
	g := newGuardConn(ctx, nc, l.opts, b)
	zc, err := zmq4.Open(g, null.Security(), l.typ, nil, true, nil)
	if err != nil {
		_ = g.Close()
		return nil, err
	}
	if g.hb != nil {
		// Both handshakes are done and every later write is a whole
		// message, so PINGs can go out between any two writes.
		g.startHeartbeat()
	}
	return newConn(g, zc), nil
}

// Accept returns the next connection whose handshake completed, or an error
// wrapping net.ErrClosed once the listener is closed.
func (l *Listener) Accept() (*Conn, error) { return l.acc.Accept() }

// Addr is the bound address (useful with port 0).
func (l *Listener) Addr() net.Addr { return l.acc.Addr() }

// Endpoint is the bound address as "tcp://host:port", the form peers dial.
func (l *Listener) Endpoint() string { return "tcp://" + l.acc.Addr().String() }

// HandshakeFailures counts accepted connections dropped before Accept
// returned them (mute peers, bad greetings, incompatible socket types).
func (l *Listener) HandshakeFailures() uint64 { return l.acc.failures.Load() }

// Close stops accepting and waits for handshakes in progress to end.
// Connections already returned by Accept stay open.
func (l *Listener) Close() error { return l.acc.Close() }

// Conn is one ZMTP connection after the handshake. ReadMsg must be called from
// one goroutine at a time; WriteMsg is safe for concurrent use and may run
// alongside ReadMsg.
type Conn struct {
	g        *guardConn
	r        *bufio.Reader
	peerType string
	peerID   []byte

	wmu  sync.Mutex
	hdrs []byte
	bufs net.Buffers
}

func newConn(g *guardConn, zc *zmq4.Conn) *Conn {
	return &Conn{
		g:        g,
		r:        bufio.NewReaderSize(g, 32<<10),
		peerType: zc.Peer.Meta["Socket-Type"],
		peerID:   []byte(zc.Peer.Meta["Identity"]),
	}
}

// PeerType is the peer's ZMTP socket type (e.g. "SUB", "DEALER").
func (c *Conn) PeerType() string { return c.peerType }

// PeerIdentity is the routing identity the peer announced (often empty).
func (c *Conn) PeerIdentity() []byte { return c.peerID }

// RemoteAddr is the peer's address.
func (c *Conn) RemoteAddr() net.Addr { return c.g.RemoteAddr() }

// Close closes the connection; a blocked ReadMsg or WriteMsg returns.
func (c *Conn) Close() error { return c.g.Close() }

// PingsSent is the number of ZMTP PINGs this connection has sent (always 0
// without Options.HeartbeatInterval): with the connection still open it
// shows how many heartbeats the peer has answered in time.
func (c *Conn) PingsSent() uint64 {
	if c.g.hb == nil {
		return 0
	}
	return c.g.hb.pings.Load()
}

// Message is one ZMTP message read by Conn.ReadMsg.
type Message struct {
	Frames  [][]byte
	Command bool // a ZMTP command (SUBSCRIBE, CANCEL, ...): one frame, name-prefixed
}

// ReadMsg reads the next message. PING commands are answered with PONG and
// PING/PONG are not returned; other commands are returned with Command set.
// Reads obey the idle deadline and frame limits of the listener's Options.
// With Options.HeartbeatInterval the connection also sends its own PINGs,
// and a peer that sends nothing at all (no PONG, no message) within
// HeartbeatTimeout of one fails ReadMsg with a *GuardError wrapping
// ErrPeerDead: a frozen or vanished engine that keeps its TCP connection
// open is dropped instead of holding it forever. libzmq answers PINGs by
// itself, so a quiet engine keeps its connection. A peer that closes the
// connection between messages ends ReadMsg with io.EOF; one that closes it
// inside a message, with io.ErrUnexpectedEOF.
func (c *Conn) ReadMsg() (Message, error) {
	for {
		m, err := c.readOne()
		if err != nil {
			return Message{}, err
		}
		if m.Command && len(m.Frames) == 1 {
			switch name, body := commandName(m.Frames[0]); name {
			case zmq4.CmdPing:
				if err := c.writePong(body); err != nil {
					return Message{}, err
				}
				continue
			case zmq4.CmdPong:
				continue
			}
		}
		return m, nil
	}
}

// IsIdle reports whether err, returned by ReadMsg, is the read deadline of
// Options.IdleTimeout: the peer sent nothing for that long. A server counts
// these closes apart from peers that left or broke the protocol.
func IsIdle(err error) bool {
	var oe *net.OpError
	return errors.As(err, &oe) && oe.Op == "read" && errors.Is(err, os.ErrDeadlineExceeded)
}

func (c *Conn) readOne() (Message, error) {
	var m Message
	for {
		flags, err := c.r.ReadByte()
		if err != nil {
			if len(m.Frames) > 0 { // the peer left after a frame with MORE
				err = noEOF(err)
			}
			return m, err
		}
		var size uint64
		if flags&flagLong != 0 {
			var b [8]byte
			if _, err := io.ReadFull(c.r, b[:]); err != nil {
				return m, noEOF(err)
			}
			size = binary.BigEndian.Uint64(b[:])
		} else {
			b, err := c.r.ReadByte()
			if err != nil {
				return m, noEOF(err)
			}
			size = uint64(b)
		}
		if size > uint64(c.g.o.MaxFrameSize) { // the guard fails first; kept as a backstop
			return m, &GuardError{Err: ErrFrameTooLarge, Size: size, Limit: uint64(c.g.o.MaxFrameSize)}
		}
		body := make([]byte, size)
		if _, err := io.ReadFull(c.r, body); err != nil {
			return m, noEOF(err)
		}
		m.Frames = append(m.Frames, body)
		m.Command = m.Command || flags&flagCommand != 0
		if flags&flagMore == 0 {
			return m, nil
		}
	}
}

func noEOF(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// commandName splits a command frame into its name and body.
func commandName(f []byte) (string, []byte) {
	if len(f) == 0 || int(f[0]) > len(f)-1 {
		return "", nil
	}
	n := int(f[0])
	return string(f[1 : 1+n]), f[1+n:]
}

// writePong answers a PING whose body (after the name) is ping, under the
// commands' write deadline (see writeCommandLocked): without WriteTimeout, a
// peer that pings and stops reading would block ReadMsg, and with it the
// heartbeat, waiting for the write lock, forever.
func (c *Conn) writePong(ping []byte) error {
	return c.g.injectCommand(pongCommand(ping))
}

// WriteMsg writes one message of the given frames with a single writev,
// under the write deadline.
func (c *Conn) WriteMsg(frames ...[]byte) error {
	return c.write(false, frames...)
}

func (c *Conn) write(command bool, frames ...[]byte) error {
	if len(frames) == 0 {
		return errors.New("zmqx: a message needs at least one frame")
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if cap(c.hdrs) < 9*len(frames) {
		c.hdrs = make([]byte, 9*len(frames))
	}
	hdrs := c.hdrs[:9*len(frames)]
	bufs := c.bufs[:0]
	for i, f := range frames {
		h := hdrs[9*i : 9*i+9]
		var flags byte
		if i < len(frames)-1 {
			flags |= flagMore
		}
		if command {
			flags |= flagCommand
		}
		n := 2
		if len(f) > 255 {
			flags |= flagLong
			binary.BigEndian.PutUint64(h[1:], uint64(len(f)))
			n = 9
		} else {
			h[1] = byte(len(f))
		}
		h[0] = flags
		bufs = append(bufs, h[:n])
		if len(f) > 0 {
			bufs = append(bufs, f)
		}
	}
	c.bufs = bufs[:0]
	return c.g.writeBuffers(&bufs)
}
