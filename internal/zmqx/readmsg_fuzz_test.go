package zmqx

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"slices"
	"testing"
	"time"
)

// streamConn is a net.Conn that serves a fixed byte stream in reads of at
// most piece bytes and keeps what is written to it.
type streamConn struct {
	r     []byte
	piece int
	w     bytes.Buffer
}

func (c *streamConn) Read(p []byte) (int, error) {
	if len(c.r) == 0 {
		return 0, io.EOF
	}
	n := copy(p[:min(len(p), c.piece)], c.r)
	c.r = c.r[n:]
	return n, nil
}
func (c *streamConn) Write(p []byte) (int, error)      { return c.w.Write(p) }
func (c *streamConn) Close() error                     { return nil }
func (c *streamConn) LocalAddr() net.Addr              { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 2} }
func (c *streamConn) RemoteAddr() net.Addr             { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1} }
func (c *streamConn) SetDeadline(time.Time) error      { return nil }
func (c *streamConn) SetReadDeadline(time.Time) error  { return nil }
func (c *streamConn) SetWriteDeadline(time.Time) error { return nil }

// refMsg is a message as the reference parser reads it.
type refMsg struct {
	frames  [][]byte
	command bool
}

// refParse reads data (the stream after the handshake) as ZMTP 3.x frames
// with the guard's limits: the complete messages, whether a limit is broken
// (violation, where reading stops) and whether a message is left incomplete.
func refParse(data []byte, o Options) (msgs []refMsg, violation, partial bool) {
	var m refMsg
	var size uint64
	for len(data) > 0 {
		flags := data[0]
		hdr := 2
		if flags&flagLong != 0 {
			hdr = 9
		}
		if len(data) < hdr {
			return msgs, false, true
		}
		n := uint64(data[1])
		if hdr == 9 {
			n = binary.BigEndian.Uint64(data[1:9])
		}
		size += n + frameOverhead
		if n > uint64(o.MaxFrameSize) || size > uint64(o.MaxMessageSize) {
			return msgs, true, true
		}
		if uint64(len(data)-hdr) < n {
			return msgs, false, true
		}
		m.frames = append(m.frames, data[hdr:hdr+int(n)])
		m.command = m.command || flags&flagCommand != 0
		data = data[hdr+int(n):]
		if flags&flagMore == 0 {
			msgs, m, size = append(msgs, m), refMsg{}, 0
		}
	}
	return msgs, false, len(m.frames) > 0
}

// readAll reads every message a server Conn gets from a peer that completed
// the handshake and then sent data in reads of piece bytes: the messages
// ReadMsg returned, what the Conn wrote back and the error it ended with.
func readAll(t *testing.T, data []byte, piece int, o Options) ([]Message, []byte, error) {
	hs := append(zmtpGreeting(false), zmtpCommand("READY", readyProps("Socket-Type", "DEALER"))...)
	sc := &streamConn{r: append(slices.Clone(hs), data...), piece: piece}
	g := newGuardConn(context.Background(), sc, o, nil)
	defer g.Close()
	if _, err := io.ReadFull(g, make([]byte, len(hs))); err != nil {
		t.Fatalf("handshake: %v", err)
	}
	c := &Conn{g: g, r: bufio.NewReaderSize(g, 32<<10)}
	var got []Message
	for {
		m, err := c.ReadMsg()
		if err != nil {
			return got, sc.w.Bytes(), err
		}
		got = append(got, m)
	}
}

// isPingPong reports whether ReadMsg answers or skips m instead of returning it.
func isPingPong(m refMsg) bool {
	if !m.command || len(m.frames) != 1 {
		return false
	}
	name, _ := commandName(m.frames[0])
	return name == "PING" || name == "PONG"
}

// FuzzReadMsg feeds arbitrary bytes, after a valid handshake, to the frame
// reader of kvroute's server sockets (the publisher, replay and snapshot
// servers accept any TCP peer; seed corpus in testdata/fuzz/FuzzReadMsg):
// it never panics; it returns exactly the messages a reference ZMTP parser
// reads, or a prefix of them ending in a *GuardError where a frame or message
// breaks the bounds; it ends with io.EOF only at a message boundary; every
// PING is answered with a PONG echoing its context; and every message read,
// written back by WriteMsg, reads back identically.
func FuzzReadMsg(f *testing.F) {
	f.Add(zmtpMessage([]byte{}, []byte("snapshot")), uint8(3))
	f.Add(append(zmtpCommand("PING", []byte{0, 10, 'c', 't', 'x'}), zmtpMessage([]byte{}, make([]byte, 300))...), uint8(1))
	f.Add(append(zmtpCommand("SUBSCRIBE", []byte("kv@")), 0x01, 0x01, 0x01, 0x01), uint8(2))
	f.Add(append(zmtpMessage([]byte("a")), hugeFrameHeader(1<<40)...), uint8(9))
	f.Add(append(zmtpFrame(flagMore, []byte("x")), 0x00), uint8(5))
	f.Add(zmtpFrame(flagMore, []byte("x")), uint8(4))
	f.Add(zmtpCommand("PONG", nil), uint8(64))
	o := Options{MaxFrameSize: 1 << 12, MaxMessageSize: 1 << 13}.withDefaults()
	f.Fuzz(func(t *testing.T, data []byte, piece uint8) {
		got, written, err := readAll(t, data, int(piece%64)+1, o)
		ref, violation, partial := refParse(data, o)
		var want []Message
		var pongs [][]byte
		for _, m := range ref {
			if !isPingPong(m) {
				want = append(want, Message{Frames: m.frames, Command: m.command})
			} else if name, body := commandName(m.frames[0]); name == "PING" {
				pongs = append(pongs, pongCommand(body))
			}
		}
		if len(got) > len(want) {
			t.Fatalf("%d messages read, the stream holds %d", len(got), len(want))
		}
		for i := range got {
			if got[i].Command != want[i].Command || !slices.EqualFunc(got[i].Frames, want[i].Frames, bytes.Equal) {
				t.Fatalf("message %d: read %+v, the stream holds %+v", i, got[i], want[i])
			}
		}
		var ge *GuardError
		switch {
		case violation:
			if !errors.As(err, &ge) {
				t.Fatalf("a stream beyond the bounds ended with %v", err)
			}
		case len(got) != len(want):
			t.Fatalf("read %d of the stream's %d messages, then %v", len(got), len(want), err)
		case partial && !errors.Is(err, io.ErrUnexpectedEOF):
			t.Fatalf("a stream ending inside a message ended with %v", err)
		case !partial && err != io.EOF:
			t.Fatalf("a stream ending at a message boundary ended with %v", err)
		}
		if !violation && !bytes.Equal(written, bytes.Join(pongs, nil)) {
			t.Fatalf("wrote %q for %d PINGs", written, len(pongs))
		}

		// Written back and read again: the same messages.
		sc := &streamConn{}
		c := &Conn{g: newGuardConn(context.Background(), sc, o, nil)}
		defer c.g.Close()
		var again []Message
		for _, m := range got {
			if !m.Command {
				if err := c.WriteMsg(m.Frames...); err != nil {
					t.Fatal(err)
				}
				again = append(again, m)
			}
		}
		back, _, err := readAll(t, sc.w.Bytes(), 64, o)
		if err != io.EOF || len(back) != len(again) {
			t.Fatalf("read back %d of %d messages written, then %v", len(back), len(again), err)
		}
		for i := range back {
			if !slices.EqualFunc(back[i].Frames, again[i].Frames, bytes.Equal) {
				t.Fatalf("message %d read back as %+v, written as %+v", i, back[i], again[i])
			}
		}
	})
}
