package zmqx

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Raw ZMTP 3.0 building blocks for fake peers: tests speak the protocol byte by
// byte so they can misbehave in ways no real library would.

func zmtpGreeting(server bool) []byte {
	g := make([]byte, 64)
	g[0] = 0xff
	g[9] = 0x7f
	g[10], g[11] = 3, 0
	copy(g[12:32], "NULL")
	if server {
		g[32] = 1
	}
	return g
}

func zmtpFrame(flags byte, body []byte) []byte {
	var out []byte
	if len(body) > 255 {
		out = make([]byte, 9, 9+len(body))
		out[0] = flags | flagLong
		binary.BigEndian.PutUint64(out[1:], uint64(len(body)))
	} else {
		out = []byte{flags, byte(len(body))}
	}
	return append(out, body...)
}

// zmtpMessage encodes frames as one multipart message.
func zmtpMessage(frames ...[]byte) []byte {
	var out []byte
	for i, f := range frames {
		var fl byte
		if i < len(frames)-1 {
			fl = flagMore
		}
		out = append(out, zmtpFrame(fl, f)...)
	}
	return out
}

func zmtpCommand(name string, body []byte) []byte {
	b := append([]byte{byte(len(name))}, name...)
	return zmtpFrame(flagCommand, append(b, body...))
}

// readyBody builds READY properties from key/value pairs.
func readyProps(kv ...string) []byte {
	var b []byte
	for i := 0; i+1 < len(kv); i += 2 {
		b = append(b, byte(len(kv[i])))
		b = append(b, kv[i]...)
		b = binary.BigEndian.AppendUint32(b, uint32(len(kv[i+1])))
		b = append(b, kv[i+1]...)
	}
	return b
}

// hugeFrameHeader announces a LONG frame of size bytes (no body follows).
func hugeFrameHeader(size uint64) []byte {
	h := make([]byte, 9)
	h[0] = flagLong
	binary.BigEndian.PutUint64(h[1:], size)
	return h
}

// readFrame reads one raw frame from r.
func readFrame(r io.Reader) (flags byte, body []byte, err error) {
	var h [2]byte
	if _, err = io.ReadFull(r, h[:]); err != nil {
		return 0, nil, err
	}
	size := uint64(h[1])
	if h[0]&flagLong != 0 {
		var l [8]byte
		l[0] = h[1]
		if _, err = io.ReadFull(r, l[1:]); err != nil {
			return 0, nil, err
		}
		size = binary.BigEndian.Uint64(l[:])
	}
	if size > 1<<30 {
		return 0, nil, errors.New("test peer: frame too large")
	}
	body = make([]byte, size)
	_, err = io.ReadFull(r, body)
	return h[0], body, err
}

// fakeServer accepts TCP connections on loopback and runs fn on each in its
// own goroutine. Stop closes the listener and every connection and waits.
type fakeServer struct {
	l     net.Listener
	mu    sync.Mutex
	conns []net.Conn
	wg    sync.WaitGroup
}

func startFakeServer(t testing.TB, fn func(c net.Conn)) *fakeServer {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s := &fakeServer{l: l}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.conns = append(s.conns, c)
			s.wg.Add(1)
			s.mu.Unlock()
			go func() {
				defer s.wg.Done()
				fn(c)
			}()
		}
	}()
	return s
}

func (s *fakeServer) Addr() string { return s.l.Addr().String() }

func (s *fakeServer) Stop() {
	_ = s.l.Close()
	s.mu.Lock()
	for _, c := range s.conns {
		_ = c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// handshakeAs completes a ZMTP handshake on c as socket type typ.
func handshakeAs(c net.Conn, typ string, server bool) error {
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	defer func() { _ = c.SetDeadline(time.Time{}) }()
	if _, err := c.Write(zmtpGreeting(server)); err != nil {
		return err
	}
	var g [64]byte
	if _, err := io.ReadFull(c, g[:]); err != nil {
		return err
	}
	if _, err := c.Write(zmtpCommand("READY", readyProps("Socket-Type", typ))); err != nil {
		return err
	}
	fl, body, err := readFrame(c)
	if err != nil {
		return err
	}
	if fl&flagCommand == 0 || len(body) < 6 || string(body[1:6]) != "READY" {
		return errors.New("test peer: expected READY")
	}
	return nil
}
