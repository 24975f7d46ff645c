package zmqx

import (
	"errors"
	"testing"

	"github.com/go-zeromq/zmq4"
)

// FuzzCheckReady: whatever a peer sends as its handshake command, either
// checkReady rejects it or go-zeromq can parse it and compare socket types
// without panicking.
func FuzzCheckReady(f *testing.F) {
	f.Add(append([]byte{5}, append([]byte("READY"), readyProps("Socket-Type", "PUB")...)...))
	f.Add(append([]byte{5}, append([]byte("READY"), readyProps("socket-type", "DEALER", "Identity", "abc")...)...))
	f.Add(append([]byte{5}, append([]byte("READY"), readyProps("Socket-Type", "FOO")...)...))
	f.Add(append([]byte{5}, "READY\xc8ab"...))
	f.Add([]byte{9})
	f.Fuzz(func(t *testing.T, body []byte) {
		if checkReady(body) != "" {
			return
		}
		var cmd zmq4.Cmd
		if len(body) == 0 || int(body[0]) > len(body)-1 {
			t.Fatal("accepted a command with a bad name length")
		}
		cmd.Name = string(body[1 : 1+int(body[0])])
		if cmd.Name != zmq4.CmdReady {
			return
		}
		md := make(zmq4.Metadata)
		if err := md.UnmarshalZMTP(body[1+int(body[0]):]); err != nil {
			t.Fatalf("accepted READY that go-zeromq rejects: %v", err)
		}
		st := zmq4.SocketType(md["Socket-Type"])
		_ = st.IsCompatible(zmq4.Sub) // panics for unknown types
	})
}

// FuzzScan: the guard reaches the same verdict however the stream is split.
func FuzzScan(f *testing.F) {
	f.Add(validStream()[greetingLen:], uint8(1))
	f.Add(hugeFrameHeader(1<<40), uint8(3))
	f.Add(append(zmtpCommand("READY", readyProps("Socket-Type", "PUB")), 0x03, 0, 0, 0, 0, 0, 0, 1, 0), uint8(2))
	f.Add([]byte{0x04, 0x00}, uint8(7))
	f.Fuzz(func(t *testing.T, data []byte, piece uint8) {
		o := Options{MaxFrameSize: 1 << 16, MaxMessageSize: 1 << 17}
		stream := append(zmtpGreeting(true), data...)
		_, whole := scanStream(stream, o, []int{len(stream) + 1})
		_, split := scanStream(stream, o, []int{int(piece%64) + 1})
		if (whole == nil) != (split == nil) {
			t.Fatalf("verdicts differ: whole %v, split %v", whole, split)
		}
		if whole != nil && !errors.Is(split, errors.Unwrap(whole)) {
			t.Fatalf("reasons differ: whole %v, split %v", whole, split)
		}
	})
}
