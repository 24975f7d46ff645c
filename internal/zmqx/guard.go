package zmqx

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Sentinel reasons carried by *GuardError; test with errors.Is.
var (
	// ErrFrameTooLarge: the peer announced a frame above Options.MaxFrameSize.
	ErrFrameTooLarge = errors.New("zmqx: frame above the size limit")
	// ErrMessageTooLarge: the frames of one message add up above Options.MaxMessageSize.
	ErrMessageTooLarge = errors.New("zmqx: message above the size limit")
	// ErrBadHandshake: the peer's READY command is malformed in a way that
	// would crash go-zeromq (it indexes and type-switches READY metadata
	// without bounds or validity checks).
	ErrBadHandshake = errors.New("zmqx: malformed ZMTP handshake")
)

// GuardError is the error a guarded connection returns when the peer breaks a
// limit or the handshake rules. It is a net.Error whose Timeout is false, so
// go-zeromq marks the connection closed instead of retrying the read, and it
// is returned with zero bytes, so go-zeromq never allocates the announced size.
type GuardError struct {
	Err    error  // one of ErrFrameTooLarge, ErrMessageTooLarge, ErrBadHandshake
	Size   uint64 // announced size for the size errors
	Limit  uint64 // the limit that was exceeded
	Detail string // what was wrong with the handshake
	Remote string // the peer's address
}

// Error describes the violation and the peer.
func (e *GuardError) Error() string {
	switch {
	case errors.Is(e.Err, ErrBadHandshake), errors.Is(e.Err, ErrPeerDead):
		return fmt.Sprintf("%v from %s: %s", e.Err, e.Remote, e.Detail)
	default:
		return fmt.Sprintf("%v: peer %s announced %d bytes, limit %d", e.Err, e.Remote, e.Size, e.Limit)
	}
}

// Unwrap returns the sentinel reason.
func (e *GuardError) Unwrap() error { return e.Err }

// Timeout is false: the connection is unusable, not slow.
func (e *GuardError) Timeout() bool { return false }

// Temporary is false (kept for net.Error).
func (e *GuardError) Temporary() bool { return false }

var _ net.Error = (*GuardError)(nil)

// ZMTP 3.x frame flags and layout.
const (
	flagMore      = 0x01
	flagLong      = 0x02
	flagCommand   = 0x04
	greetingLen   = 64
	socketTypeKey = "Socket-Type"
)

// guardConn wraps a TCP connection used by one ZMTP peer. Reads re-arm a
// deadline (handshake, then idle), and the byte stream is followed frame by
// frame so that oversized frames and malformed READY commands fail the read
// before go-zeromq sees them. Reads come from a single goroutine (go-zeromq's
// per-connection reader, or its handshake before that), so the scanner state
// needs no lock; writes are serialised by wmu.
type guardConn struct {
	net.Conn
	o         Options
	stopMu    sync.Mutex
	stop      func() bool // unregisters the close-on-context-done hook
	closeOnce sync.Once
	closeErr  error

	pre []byte // bytes read ahead by the listener, delivered first

	// scanner state
	err        error // sticky guard error
	greeting   int   // greeting bytes still to pass through
	handshook  bool  // the peer's first frame (READY) is complete
	hdr        [9]byte
	hdrLen     int
	body       uint64 // body bytes of the current frame still to pass
	more       bool   // the current frame has the MORE flag
	msgSize    uint64 // accounted size of the current message
	capture    []byte // the handshake command body, validated when complete
	capturing  bool
	deadlineOn bool
	// hsDeadline ends the whole handshake: set by the handshake's first
	// read from the network (when go-zeromq starts the handshake, which a
	// listening socket does for one connection at a time) and armed on
	// every read until the peer's READY has arrived, so a peer that keeps
	// sending a byte at a time cannot stretch the handshake beyond it.
	hsDeadline time.Time
	handshookA atomic.Bool // mirror of handshook for the heartbeat goroutine

	// Connections owned by go-zeromq sockets (the transport) answer the
	// peer's PING themselves and may send their own (hb != nil); Conn, used
	// by kvroute's server sockets, answers PING in ReadMsg instead.
	autoPong bool
	cmd      [32]byte // a post-handshake command frame being captured
	cmdLen   int
	cmdOn    bool
	hb       *heartbeat
	// wholeMsgs: every write after the handshake is a whole message (Conn
	// writes each message with one writev under wmu), so a command can be
	// written at any time between two writes.
	wholeMsgs bool

	wmu writeLock
	ws  wscan
}

// newGuardConn wraps c for a Conn (kvroute's server sockets). When ctx ends
// the connection is closed, which releases connections go-zeromq abandons
// after a failed handshake. With Options.HeartbeatInterval the heartbeat
// state is created here, before Close can run, and started by
// the Listener's handshake once it is done.
func newGuardConn(ctx context.Context, c net.Conn, o Options, pre []byte) *guardConn {
	g := &guardConn{Conn: c, o: o, pre: pre, greeting: greetingLen, wholeMsgs: true, wmu: newWriteLock()}
	if o.HeartbeatInterval > 0 {
		g.hb = &heartbeat{interval: o.HeartbeatInterval, timeout: o.HeartbeatTimeout,
			done: make(chan struct{}), exited: make(chan struct{})}
	}
	g.closeWith(ctx)
	return g
}

// closeWith closes g when ctx ends. It must come after every field Close
// reads is set: with a context that has already ended, Close runs at once on
// another goroutine.
func (g *guardConn) closeWith(ctx context.Context) {
	stop := context.AfterFunc(ctx, func() { _ = g.Close() })
	g.stopMu.Lock()
	g.stop = stop
	g.stopMu.Unlock()
}

// newSocketConn wraps c for a go-zeromq socket: PINGs are answered with PONG
// and, with Options.HeartbeatInterval, PINGs are sent and a silent peer is
// failed with ErrPeerDead.
func newSocketConn(ctx context.Context, c net.Conn, o Options, pre []byte) *guardConn {
	g := &guardConn{Conn: c, o: o, pre: pre, greeting: greetingLen, autoPong: true, wmu: newWriteLock()}
	g.ws.greeting = greetingLen
	if o.HeartbeatInterval > 0 {
		g.hb = &heartbeat{interval: o.HeartbeatInterval, timeout: o.HeartbeatTimeout,
			done: make(chan struct{}), exited: make(chan struct{})}
	}
	// The heartbeat is set before Close can run (the context may already
	// have ended), so that Close always stops it; started after, its loop
	// ends at once when Close came first.
	g.closeWith(ctx)
	if g.hb != nil {
		g.startHeartbeat()
	}
	return g
}

// Close closes the connection once and unregisters the context hook.
func (g *guardConn) Close() error {
	g.closeOnce.Do(func() {
		g.stopMu.Lock()
		stop := g.stop
		g.stopMu.Unlock()
		if stop != nil {
			stop()
		}
		g.closeErr = g.Conn.Close()
		if g.hb != nil {
			close(g.hb.done)
		}
	})
	return g.closeErr
}

// Read reads from the peer, enforcing deadlines and frame limits.
func (g *guardConn) Read(p []byte) (int, error) {
	if g.err != nil {
		return 0, g.err
	}
	if len(g.pre) > 0 {
		n := copy(p, g.pre)
		g.pre = g.pre[n:]
		if err := g.scan(p[:n]); err != nil {
			return 0, g.fail(err)
		}
		return n, nil
	}
	if !g.handshook && g.o.HandshakeTimeout > 0 {
		if g.hsDeadline.IsZero() {
			g.hsDeadline = time.Now().Add(g.o.HandshakeTimeout) // a socket deadline: wall time, as the OS keeps it
		}
		_ = g.Conn.SetReadDeadline(g.hsDeadline)
		g.deadlineOn = true
	} else if d := g.o.IdleTimeout; g.handshook && d > 0 {
		_ = g.Conn.SetReadDeadline(time.Now().Add(d)) // a socket deadline: wall time, as the OS keeps it
		g.deadlineOn = true
	} else if g.deadlineOn {
		_ = g.Conn.SetReadDeadline(time.Time{})
		g.deadlineOn = false
	}
	n, err := g.Conn.Read(p)
	if g.hb != nil {
		g.hb.readBytes.Add(uint64(n))
		if err != nil && g.hb.dead.Load() {
			err = g.fail(g.guardErr(ErrPeerDead, 0, 0,
				fmt.Sprintf("nothing received within %v of a PING", g.hb.timeout)))
			return 0, err
		}
	}
	if n > 0 {
		if serr := g.scan(p[:n]); serr != nil {
			// Zero bytes with the error: io.ReadFull drops an error once it has
			// all the bytes it asked for, and go-zeromq would then allocate.
			return 0, g.fail(serr)
		}
	}
	if err != nil && !g.handshook {
		// go-zeromq does not close a connection whose handshake failed.
		_ = g.Close()
	}
	return n, err
}

func (g *guardConn) fail(err error) error {
	g.err = err
	_ = g.Close()
	return err
}

// Write writes p under the write deadline.
func (g *guardConn) Write(p []byte) (int, error) {
	g.wmu.Lock()
	defer g.wmu.Unlock()
	g.armWrite()
	n, err := g.Conn.Write(p)
	if g.autoPong {
		g.afterWriteLocked(p[:n])
	}
	return n, err
}

// writeBuffers writes bufs with one writev when the inner conn supports it.
func (g *guardConn) writeBuffers(bufs *net.Buffers) error {
	g.wmu.Lock()
	defer g.wmu.Unlock()
	g.armWrite()
	_, err := bufs.WriteTo(g.Conn)
	return err
}

func (g *guardConn) armWrite() {
	if g.o.WriteTimeout > 0 {
		_ = g.Conn.SetWriteDeadline(time.Now().Add(g.o.WriteTimeout)) // a socket deadline: wall time
	}
}

func (g *guardConn) guardErr(reason error, size, limit uint64, detail string) error {
	remote := "?"
	if a := g.Conn.RemoteAddr(); a != nil {
		remote = a.String()
	}
	return &GuardError{Err: reason, Size: size, Limit: limit, Detail: detail, Remote: remote}
}

// scan follows ZMTP 3.x framing over b: the 64-byte greeting, then frames of a
// flags byte, a 1-byte or (LONG) 8-byte big-endian size, and the body.
func (g *guardConn) scan(b []byte) error {
	for len(b) > 0 {
		if g.greeting > 0 {
			k := min(g.greeting, len(b))
			g.greeting -= k
			b = b[k:]
			continue
		}
		if g.body > 0 {
			k := min(g.body, uint64(len(b)))
			if g.capturing {
				g.capture = append(g.capture, b[:k]...)
			}
			if g.cmdOn {
				g.cmdLen += copy(g.cmd[g.cmdLen:], b[:k])
			}
			g.body -= k
			b = b[k:]
			if g.body == 0 {
				if err := g.endFrame(); err != nil {
					return err
				}
			}
			continue
		}
		g.hdr[g.hdrLen] = b[0]
		g.hdrLen++
		b = b[1:]
		need := 2
		if g.hdr[0]&flagLong != 0 {
			need = 9
		}
		if g.hdrLen < need {
			continue
		}
		g.hdrLen = 0
		if err := g.startFrame(g.hdr[0], need); err != nil {
			return err
		}
		if g.body == 0 {
			if err := g.endFrame(); err != nil {
				return err
			}
		}
	}
	return nil
}

func (g *guardConn) startFrame(flags byte, hdrLen int) error {
	size := uint64(g.hdr[1])
	if hdrLen == 9 {
		size = binary.BigEndian.Uint64(g.hdr[1:9])
	}
	if size > uint64(g.o.MaxFrameSize) {
		return g.guardErr(ErrFrameTooLarge, size, uint64(g.o.MaxFrameSize), "")
	}
	g.msgSize += size + frameOverhead
	if g.msgSize > uint64(g.o.MaxMessageSize) {
		return g.guardErr(ErrMessageTooLarge, g.msgSize, uint64(g.o.MaxMessageSize), "")
	}
	g.more = flags&flagMore != 0
	g.body = size
	if !g.handshook && flags&flagCommand != 0 {
		if size > maxHandshakeCommand {
			return g.guardErr(ErrBadHandshake, size, maxHandshakeCommand,
				fmt.Sprintf("handshake command of %d bytes", size))
		}
		g.capturing = true
		g.capture = make([]byte, 0, size)
	}
	if g.handshook && g.autoPong && flags&flagCommand != 0 && size <= uint64(maxPingBody) {
		g.cmdOn, g.cmdLen = true, 0
	}
	return nil
}

func (g *guardConn) endFrame() error {
	if g.cmdOn {
		g.cmdOn = false
		if name, body := commandName(g.cmd[:g.cmdLen]); name == "PING" {
			// Answer at once: libzmq drops a peer that stays silent for
			// its ZMQ_HEARTBEAT_TIMEOUT after a PING. go-zeromq still
			// surfaces the PING as a command message, which Recv skips.
			if err := g.injectCommand(pongCommand(body)); err == nil {
				pongsSent.Add(1)
			}
		}
	}
	if !g.handshook {
		g.handshook = true
		g.handshookA.Store(true)
		if g.capturing {
			body := g.capture
			g.capturing, g.capture = false, nil
			if detail := checkReady(body); detail != "" {
				return g.guardErr(ErrBadHandshake, 0, 0, detail)
			}
		}
	}
	if !g.more {
		g.msgSize = 0
	}
	return nil
}

// knownSocketTypes are the types go-zeromq can compare without panicking.
var knownSocketTypes = map[string]bool{
	"PAIR": true, "PUB": true, "SUB": true, "REQ": true, "REP": true, "DEALER": true,
	"ROUTER": true, "PULL": true, "PUSH": true, "XPUB": true, "XSUB": true,
}

// checkReady validates a handshake command body and returns what is wrong
// with it, or "" when go-zeromq can process it safely. Commands other than
// READY are left to go-zeromq, which rejects them without crashing.
//
// go-zeromq v0.17.0 parses READY properties without bounds checks and calls
// SocketType.IsCompatible on the peer's Socket-Type, which panics for a value
// it does not know (or a missing one). It looks the key up after Unicode
// title-casing, so only ASCII keys are accepted here and a Socket-Type key must
// be spelt so that title-casing yields exactly "Socket-Type".
func checkReady(body []byte) string {
	if len(body) == 0 {
		return "empty command"
	}
	n := int(body[0])
	if n > len(body)-1 {
		return "command name longer than the command"
	}
	if string(body[1:1+n]) != "READY" {
		return ""
	}
	props := body[1+n:]
	found := false
	for len(props) > 0 {
		kl := int(props[0])
		if 1+kl+4 > len(props) {
			return "truncated READY property"
		}
		key := props[1 : 1+kl]
		vl := binary.BigEndian.Uint32(props[1+kl : 5+kl])
		if uint64(vl) > uint64(len(props)-5-kl) {
			return "READY property value longer than the command"
		}
		val := props[5+kl : 5+kl+int(vl)]
		for _, c := range key {
			if c >= 0x80 {
				return "non-ASCII READY property name"
			}
		}
		if isSocketTypeKey(key) {
			if !knownSocketTypes[string(val)] {
				return fmt.Sprintf("unknown Socket-Type %q", val)
			}
			found = true
		} else if len(key) == len(socketTypeKey) && equalFoldASCII(key, socketTypeKey) {
			return fmt.Sprintf("Socket-Type key spelt %q", key)
		}
		props = props[5+kl+int(vl):]
	}
	if !found {
		return "READY without Socket-Type"
	}
	return ""
}

// isSocketTypeKey reports whether title-casing key gives "Socket-Type": only
// the first letter of each word may differ in case.
func isSocketTypeKey(key []byte) bool {
	if len(key) != len(socketTypeKey) {
		return false
	}
	for i := range key {
		c, want := key[i], socketTypeKey[i]
		if c == want {
			continue
		}
		if (i == 0 || i == 7) && c == want+('a'-'A') {
			continue
		}
		return false
	}
	return true
}

func equalFoldASCII(a []byte, b string) bool {
	for i := range a {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}
