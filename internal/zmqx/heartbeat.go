package zmqx

import (
	"errors"
	"sync/atomic"
	"time"

	"github.com/kvroute/kvroute/telemetry"
)

// ErrPeerDead is the reason of the *GuardError a connection fails with when
// heartbeats are enabled and the peer sent nothing (no PONG, no message)
// within Options.HeartbeatTimeout of a PING. A frozen (SIGSTOPped) or
// partitioned publisher keeps its TCP connection open and raises no error by
// itself; this is how it is detected.
var ErrPeerDead = errors.New("zmqx: no answer to heartbeat")

// ZMTP 3.1 heartbeat commands: PING carries a 2-byte TTL (deciseconds) and a
// context of up to 16 bytes that PONG echoes.
var (
	pingCommand = []byte{flagCommand, 7, 4, 'P', 'I', 'N', 'G', 0, 0} // TTL 0: the peer applies none
	maxPingBody = 1 + 4 + 2 + 16
)

// pongsSent counts PONGs written by connections of go-zeromq sockets.
var pongsSent atomic.Uint64

// PongsSent is the number of PONGs this process's go-zeromq sockets have
// written in answer to their peers' PINGs (process-wide): a peer that
// pings (a libzmq engine with ZMQ_HEARTBEAT_IVL) is being answered.
func PongsSent() uint64 { return pongsSent.Load() }

// pongCommand builds the PONG frame answering a PING whose body (after the
// name) is ping.
func pongCommand(ping []byte) []byte {
	var ctx []byte
	if len(ping) > 2 {
		ctx = ping[2:]
		if len(ctx) > 16 {
			ctx = ctx[:16]
		}
	}
	f := make([]byte, 0, 2+5+len(ctx))
	f = append(f, flagCommand, byte(5+len(ctx)), 4, 'P', 'O', 'N', 'G')
	return append(f, ctx...)
}

// wscan follows the ZMTP frames this side writes (greeting, READY, then
// messages), so that a PING or PONG is only ever written between two
// messages: go-zeromq writes a frame's header and body with separate Write
// calls, from more than one goroutine. Guarded by guardConn.wmu.
type wscan struct {
	greeting int // greeting bytes still to pass
	hdr      [9]byte
	hdrLen   int
	body     uint64 // body bytes of the current frame still to pass
	more     bool   // the current frame has MORE
	frames   int    // complete frames written after the greeting
	pending  []byte // a command waiting for the next message boundary
}

// atBoundary reports whether the writes so far end a message after the
// handshake, so a command can be inserted.
func (w *wscan) atBoundary() bool {
	return w.greeting == 0 && w.frames > 0 && w.hdrLen == 0 && w.body == 0 && !w.more
}

func (w *wscan) scan(b []byte) {
	for len(b) > 0 {
		if w.greeting > 0 {
			k := min(w.greeting, len(b))
			w.greeting -= k
			b = b[k:]
			continue
		}
		if w.body > 0 {
			k := min(w.body, uint64(len(b)))
			w.body -= k
			b = b[k:]
			if w.body == 0 {
				w.frames++
			}
			continue
		}
		w.hdr[w.hdrLen] = b[0]
		w.hdrLen++
		b = b[1:]
		need := 2
		if w.hdr[0]&flagLong != 0 {
			need = 9
		}
		if w.hdrLen < need {
			continue
		}
		w.hdrLen = 0
		w.more = w.hdr[0]&flagMore != 0
		w.body = uint64(w.hdr[1])
		if need == 9 {
			w.body = be64(w.hdr[1:9])
		}
		if w.body == 0 {
			w.frames++
		}
	}
}

func be64(b []byte) uint64 {
	return uint64(b[0])<<56 | uint64(b[1])<<48 | uint64(b[2])<<40 | uint64(b[3])<<32 |
		uint64(b[4])<<24 | uint64(b[5])<<16 | uint64(b[6])<<8 | uint64(b[7])
}

// heartbeat is the per-connection state of ZMTP heartbeats on a connection
// owned by a go-zeromq socket (dialled or accepted through the transport),
// or on a Conn accepted by a Listener.
//
// Ownership: startHeartbeat runs one goroutine per connection, which owns
// its ticker and timer, writes PINGs through ping (under the connection's
// wmu, like every other write, waited for at most timeout at a time) and
// sets dead. The reader
// adds to readBytes and reads dead. The connection's Close closes done,
// once, and the goroutine returns at its next select and closes exited (a
// PING it is writing meanwhile fails on the closed connection). Close does
// not wait for it, since the goroutine itself calls Close when the peer is
// dead. interval and timeout are set before it starts and not written
// after.
type heartbeat struct {
	interval, timeout time.Duration
	readBytes         atomic.Uint64 // bytes received, the liveness evidence
	dead              atomic.Bool
	done              chan struct{}
	exited            chan struct{}
	pings             atomic.Uint64 // PINGs sent
}

// injectCommand writes a command frame at the next message boundary of the
// outgoing stream: now if the stream is at one, else right after the write
// that completes the current message. Only the latest pending command is
// kept (heartbeats coalesce).
func (g *guardConn) injectCommand(f []byte) error {
	g.wmu.Lock()
	defer g.wmu.Unlock()
	return g.injectCommandLocked(f)
}

// injectCommandLocked is injectCommand with the write lock held.
func (g *guardConn) injectCommandLocked(f []byte) error {
	if !g.wholeMsgs && !g.ws.atBoundary() {
		g.ws.pending = f
		return nil
	}
	return g.writeCommandLocked(f)
}

// writeCommandLocked writes f under a write deadline (WriteTimeout, else the
// heartbeat timeout, else 1 s), so a peer that stopped reading cannot block
// the heartbeat goroutine or the reader. A write that fails closes the
// connection: it may have left part of the frame in the stream, and the
// next message would be read from inside it.
func (g *guardConn) writeCommandLocked(f []byte) error {
	d := g.o.WriteTimeout
	if d <= 0 {
		d = time.Second
		if g.hb != nil && g.hb.timeout > 0 {
			d = g.hb.timeout
		}
	}
	_ = g.Conn.SetWriteDeadline(time.Now().Add(d)) // a socket deadline: wall time, as the OS keeps it
	_, err := g.Conn.Write(f)
	if err != nil {
		_ = g.Close()
		return err
	}
	if g.o.WriteTimeout <= 0 {
		_ = g.Conn.SetWriteDeadline(time.Time{})
	}
	return nil
}

// afterWriteLocked runs after go-zeromq's bytes b were written: it follows
// the framing and flushes a pending command at a message boundary.
func (g *guardConn) afterWriteLocked(b []byte) {
	g.ws.scan(b)
	if g.ws.pending != nil && g.ws.atBoundary() {
		f := g.ws.pending
		g.ws.pending = nil
		_ = g.writeCommandLocked(f)
	}
}

// startHeartbeat runs the PING loop of a connection: a PING every interval
// once both handshakes are done, and ErrPeerDead when nothing at all arrives
// within timeout of an unanswered PING (libzmq's rule: any received traffic
// counts as an answer), both on Options.Clock. Traffic counts once it has
// arrived on the socket, read or not: a peer is not blamed for an owner
// that stopped reading, and while bytes wait unread the peer's silence
// cannot be seen, so it is not judged. The goroutine ends when the
// connection closes.
func (g *guardConn) startHeartbeat() {
	hb := g.hb
	go func() {
		defer close(hb.exited)
		clk := g.o.Clock
		if clk == nil {
			clk = telemetry.Wall
		}
		tick := clk.NewTicker(hb.interval)
		defer tick.Stop()
		var timer telemetry.Timer
		var timerC <-chan time.Time
		var armedAt uint64
		defer func() {
			if timer != nil {
				timer.Stop()
			}
		}()
		for {
			select {
			case <-hb.done:
				return
			case <-timerC:
				timerC = nil
				// Bytes waiting unread in the kernel have arrived too:
				// the owner applies backpressure (go-zeromq's reader
				// stops once its queue is full, a Conn's owner may
				// pause ReadMsg), not the peer. They are peeked at
				// first, so that bytes the reader takes meanwhile are
				// seen in readBytes.
				if !unreadBytes(g.Conn) && hb.readBytes.Load() == armedAt {
					hb.dead.Store(true)
					_ = g.Close() // the blocked Read returns; it reports ErrPeerDead
					return
				}
			case <-tick.C():
				if !g.handshookA.Load() {
					continue
				}
				// Sampled before the PING goes out: a PONG read between
				// the write and a later sample would be taken for silence.
				before := hb.readBytes.Load()
				switch g.ping(clk, before) {
				case pingClosed:
					return
				case pingDead:
					hb.dead.Store(true)
					_ = g.Close() // the blocked Read and write return; Read reports ErrPeerDead
					return
				case pingFailed:
					continue // the reader sees the broken connection
				}
				hb.pings.Add(1)
				if timerC == nil {
					armedAt = before
					if timer == nil {
						timer = clk.NewTimer(hb.timeout)
					} else {
						timer.Reset(hb.timeout)
					}
					timerC = timer.C()
				}
			}
		}
	}()
}
