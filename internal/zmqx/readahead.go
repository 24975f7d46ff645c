package zmqx

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// readAhead is a connection's reading once the peer's READY has arrived:
// one goroutine (run) reads the peer's messages whole, answers each PING
// at once with PONG, drops PONGs (the heartbeat counts their bytes) and
// queues every other message, byte for byte as it came, for the owner's
// Read. The peer's PINGs are thus answered whatever the owner does: an
// owner that stops reading (go-zeromq's reader once its queue is full, a
// paused ReadMsg) no longer stops the reading, and a libzmq peer with
// ZMQ_HEARTBEAT_TIMEOUT keeps a connection that is busy, not dead.
//
// The queue holds at most Options.ReadAheadBytes, but always one message
// when it is empty, so a message of any allowed size gets through. A
// message that does not fit is dropped and counted (Options.OnDrop,
// MessagesDropped): the newest goes, as a libzmq publisher drops its
// newest at its high-water mark, which it would reach anyway behind a
// reader that stops. Memory is bounded by the queue, one message being assembled
// (MaxMessageSize) and the 32 KiB read buffer.
//
// Ownership: run owns br and the assembly; mu guards the rest. Read waits
// on cond for a message or the end; run's last act is to set err and wake
// it. Close empties the queue (discard), so Read then waits only for run
// to see the closed connection.
type readAhead struct {
	g    *guardConn
	once sync.Once

	mu     sync.Mutex
	cond   sync.Cond
	queue  [][]byte // whole messages, raw ZMTP frames
	head   int      // bytes of queue[0] Read has returned
	queued int64    // bytes of the messages in queue
	err    error    // why reading ended, returned once queue is empty
	closed bool     // the connection was closed: nothing more is queued
}

// startReadAhead starts the connection's reading goroutine, once. The
// handshake's reads must have ended exactly after the peer's READY (see
// handshakeLimit), since run parses the stream from a frame boundary.
func (g *guardConn) startReadAhead() *readAhead {
	ra := &g.ra
	ra.once.Do(func() {
		ra.g = g
		ra.cond.L = &ra.mu
		go ra.run()
	})
	return ra
}

// read is Read once the handshake is done: bytes of queued messages, and
// after the last of them the error that ended the reading. A peer that
// broke a limit (a *GuardError) has its connection closed then, as in the
// handshake: not by run when it finds out, so that the owner learns of it
// from a read, which is where it looks for it.
func (ra *readAhead) read(p []byte) (int, error) {
	n, err := ra.take(p)
	if _, ok := err.(*GuardError); ok {
		_ = ra.g.Close()
	}
	return n, err
}

// take is read under mu.
func (ra *readAhead) take(p []byte) (int, error) {
	ra.mu.Lock()
	defer ra.mu.Unlock()
	for len(ra.queue) == 0 && ra.err == nil {
		ra.cond.Wait()
	}
	if len(ra.queue) == 0 {
		return 0, ra.err
	}
	m := ra.queue[0]
	n := copy(p, m[ra.head:])
	ra.head += n
	if ra.head == len(m) {
		ra.queued -= int64(len(m))
		ra.queue[0] = nil
		ra.queue, ra.head = ra.queue[1:], 0
	}
	return n, nil
}

// discard empties the queue of a closed connection: its owner reads
// nothing more of it.
func (ra *readAhead) discard() {
	ra.mu.Lock()
	defer ra.mu.Unlock()
	ra.closed = true
	ra.queue, ra.head, ra.queued = nil, 0, 0
}

// finish records why the reading ended and wakes Read.
func (ra *readAhead) finish(err error) {
	ra.mu.Lock()
	defer ra.mu.Unlock()
	ra.err = err
	ra.cond.Broadcast()
}

// enqueue queues m for Read, or drops and counts it when the queue holds
// messages and m would take it past ReadAheadBytes.
func (ra *readAhead) enqueue(m []byte) {
	ra.mu.Lock()
	if ra.closed {
		ra.mu.Unlock()
		return
	}
	if len(ra.queue) > 0 && ra.queued+int64(len(m)) > ra.g.o.ReadAheadBytes {
		ra.mu.Unlock()
		messagesDropped.Add(1)
		if ra.g.o.OnDrop != nil {
			ra.g.o.OnDrop()
		}
		return
	}
	ra.queue = append(ra.queue, m)
	ra.queued += int64(len(m))
	ra.cond.Signal()
	ra.mu.Unlock()
}

// run reads messages until the connection fails or closes.
func (ra *readAhead) run() {
	g := ra.g
	br := bufio.NewReaderSize(netReader{g}, 32<<10)
	for {
		m, cmd, err := ra.readMessage(br)
		if err != nil {
			ra.finish(err) // a *GuardError closes the connection when read
			return
		}
		switch name, body := commandName(cmd); name {
		case "PING":
			// Answer at once: libzmq drops a peer that stays silent for
			// its ZMQ_HEARTBEAT_TIMEOUT after a PING. A PONG that cannot
			// be written within the commands' deadline (the peer reads
			// nothing) has closed the connection: its error is the end.
			if err := g.injectCommand(pongCommand(body)); err != nil {
				ra.finish(err)
				return
			}
			pongsSent.Add(1)
		case "PONG":
		default:
			ra.enqueue(m)
		}
	}
}

// readMessage reads one message from br and returns its raw frames, and
// the body of a single command frame small enough to be a heartbeat (nil
// otherwise). A frame above MaxFrameSize or a message above
// MaxMessageSize fails with a *GuardError before its body is allocated;
// the end of the stream inside a message is io.ErrUnexpectedEOF.
func (ra *readAhead) readMessage(br *bufio.Reader) (m, cmd []byte, err error) {
	o := &ra.g.o
	var total uint64
	for frames := 0; ; frames++ {
		flags, err := br.ReadByte()
		if err != nil {
			if frames > 0 {
				err = noEOF(err)
			}
			return nil, nil, err
		}
		m = append(m, flags)
		var size uint64
		if flags&flagLong != 0 {
			var b [8]byte
			if _, err := io.ReadFull(br, b[:]); err != nil {
				return nil, nil, noEOF(err)
			}
			m = append(m, b[:]...)
			size = binary.BigEndian.Uint64(b[:])
		} else {
			b, err := br.ReadByte()
			if err != nil {
				return nil, nil, noEOF(err)
			}
			m = append(m, b)
			size = uint64(b)
		}
		if size > uint64(o.MaxFrameSize) {
			return nil, nil, ra.g.guardErr(ErrFrameTooLarge, size, uint64(o.MaxFrameSize), "")
		}
		if total += size + frameOverhead; total > uint64(o.MaxMessageSize) {
			return nil, nil, ra.g.guardErr(ErrMessageTooLarge, total, uint64(o.MaxMessageSize), "")
		}
		hdr := len(m)
		m = slices.Grow(m, int(size))[:hdr+int(size)]
		if _, err := io.ReadFull(br, m[hdr:]); err != nil {
			return nil, nil, noEOF(err)
		}
		if flags&flagMore == 0 {
			if frames == 0 && flags&flagCommand != 0 && size <= uint64(maxPingBody) {
				cmd = m[hdr:]
			}
			return m, cmd, nil
		}
	}
}

// netReader reads the peer's bytes for run: each read under the idle
// deadline, counted as the heartbeat's evidence, and failing with
// ErrPeerDead once the heartbeat found the peer dead and closed the
// connection.
type netReader struct{ g *guardConn }

func (r netReader) Read(p []byte) (int, error) {
	g := r.g
	if d := g.o.IdleTimeout; d > 0 {
		_ = g.Conn.SetReadDeadline(time.Now().Add(d)) // a socket deadline: wall time, as the OS keeps it
	}
	n, err := g.Conn.Read(p)
	if g.hb != nil {
		g.hb.readBytes.Add(uint64(n))
		if err != nil && g.hb.dead.Load() {
			return 0, g.guardErr(ErrPeerDead, 0, 0, fmt.Sprintf("nothing received within %v of a PING", g.hb.timeout))
		}
	}
	return n, err
}

// messagesDropped counts the messages every connection dropped.
var messagesDropped atomic.Uint64

// MessagesDropped is the number of messages this process's connections
// dropped because their owner left Options.ReadAheadBytes of messages
// unread (process-wide; Options.OnDrop counts them per socket).
func MessagesDropped() uint64 { return messagesDropped.Load() }
