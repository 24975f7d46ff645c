package zmqx

import (
	"context"
	"io"
	"log"
	"log/slog"
	"strings"

	"github.com/go-zeromq/zmq4"
)

// DrainCount is how many Recv calls CloseDrain makes after Close. go-zeromq's
// per-connection reader blocks on a 10-slot channel with a send that ignores
// the socket's context; one Recv after Close frees it, and Recv after Close
// returns at once (a buffered message or the context error).
const DrainCount = 64

var discardLogger = slog.New(slog.DiscardHandler)

// StdLogger adapts lg to the *log.Logger that zmq4.WithLogger expects. Each
// line go-zeromq prints (it logs failed handshakes in listen mode, to stderr by
// default) becomes a Warn record with component=zmq4. nil lg discards.
func StdLogger(lg *slog.Logger) *log.Logger {
	if lg == nil {
		return log.New(io.Discard, "", 0)
	}
	return log.New(slogWriter{lg}, "", 0)
}

type slogWriter struct{ lg *slog.Logger }

func (w slogWriter) Write(p []byte) (int, error) {
	w.lg.Warn(strings.TrimRight(string(p), "\n"), "component", "zmq4")
	return len(p), nil
}

// socketOptions are the go-zeromq options every kvroute socket uses: no dial
// retries (callers run their own backoff; Dial blocks), logging through lg,
// and never a fixed identity.
func socketOptions(lg *slog.Logger, extra []zmq4.Option) []zmq4.Option {
	opts := []zmq4.Option{zmq4.WithDialerMaxRetries(0), zmq4.WithLogger(StdLogger(lg))}
	return append(opts, extra...)
}

// NewSub creates a go-zeromq SUB socket whose guarded connections (dial or
// listen through Endpoint) use o. Dial makes one attempt (retries 0). The
// socket's context is ctx: cancelling it unblocks Recv, but callers must still
// call CloseDrain. extra options are appended (do not pass WithID or
// WithAutomaticReconnect: libzmq silently rejects a second connection with a
// duplicate identity, and go-zeromq's reconnect redials synchronously in the
// reader goroutine and ignores its errors).
func NewSub(ctx context.Context, o Options, lg *slog.Logger, extra ...zmq4.Option) zmq4.Socket {
	return zmq4.NewSub(WithOptions(ctx, o), socketOptions(lg, extra)...)
}

// NewDealer creates a go-zeromq DEALER socket like NewSub does. A replay
// client uses a fresh one per request and bounds it with ctx's deadline.
func NewDealer(ctx context.Context, o Options, lg *slog.Logger, extra ...zmq4.Option) zmq4.Socket {
	return zmq4.NewDealer(WithOptions(ctx, o), socketOptions(lg, extra)...)
}

// Dial connects s to addr ("host:port" or "tcp://host:port") through the
// guarded transport. It blocks for at most the dial and handshake timeouts of
// the socket's Options (with retries 0).
func Dial(s zmq4.Socket, addr string) error {
	ep, err := Endpoint(addr)
	if err != nil {
		return err
	}
	return s.Dial(ep)
}

// ListenSocket binds s on addr through the guarded transport: accepted
// connections get the socket's Options, and a mute client no longer blocks
// go-zeromq's accept loop (bind mode, engines connect to kvroute).
func ListenSocket(s zmq4.Socket, addr string) error {
	ep, err := Endpoint(addr)
	if err != nil {
		return err
	}
	return s.Listen(ep)
}

// CloseDrain closes s and then calls Recv DrainCount times so that no
// go-zeromq reader goroutine stays blocked on its internal channel. Always use
// it instead of Close on SUB and DEALER sockets, even after their context
// ended.
func CloseDrain(s zmq4.Socket) error {
	err := s.Close()
	if s.Type() == zmq4.Pub {
		return err // PUB sockets cannot Recv
	}
	for range DrainCount {
		_, _ = s.Recv()
	}
	return err
}

// IsCommand reports whether m is a ZMTP command (e.g. a libzmq heartbeat PING)
// that go-zeromq surfaced as a message. Such messages must be skipped.
func IsCommand(m zmq4.Msg) bool { return m.Type == zmq4.CmdMsg }

// Recv returns the next message of s that is not a ZMTP command, and how many
// commands it skipped on the way.
func Recv(s zmq4.Socket) (m zmq4.Msg, skipped int, err error) {
	for {
		m, err = s.Recv()
		if err != nil || !IsCommand(m) {
			return m, skipped, err
		}
		skipped++
	}
}
