package zmqx

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/kvroute/kvroute/telemetry"
)

// Defaults applied by Options.withDefaults to zero fields.
const (
	// DefaultHandshakeTimeout bounds the ZMTP greeting and READY exchange. A mute
	// peer (TCP accepted, no greeting) otherwise hangs go-zeromq's Dial forever.
	DefaultHandshakeTimeout = time.Second
	// DefaultDialTimeout bounds the TCP connect of one dial attempt.
	DefaultDialTimeout = time.Second
	// DefaultMaxFrameSize is the largest frame body accepted from a peer. vLLM
	// batches are dominated by token IDs (at most 5 bytes each in msgpack), so
	// 64 MiB leaves ample room while keeping a hostile peer from making
	// go-zeromq allocate whatever size it announces.
	DefaultMaxFrameSize = 64 << 20
	// frameOverhead is what every frame costs against MaxMessageSize on top of
	// its body, so that a message of millions of empty frames is bounded too.
	frameOverhead = 64
	// maxHandshakeCommand bounds the peer's READY command, which the guard
	// buffers to validate before go-zeromq parses it.
	maxHandshakeCommand = 64 << 10
)

// Options configures the guarded transport for one socket or listener. The
// zero value is valid: every zero field takes its default.
type Options struct {
	// HandshakeTimeout bounds the whole handshake, from its start until the
	// peer's ZMTP READY command has arrived (default 1 s; negative
	// disables); a peer sending a byte at a time cannot extend it. A
	// listener also waits this long for the peer's first byte before it
	// starts the handshake.
	HandshakeTimeout time.Duration `json:"handshakeTimeout"`
	// IdleTimeout bounds each read after the handshake: a connection that
	// delivers no byte for this long fails with a timeout error (0 = none).
	// The deadline is re-armed before every read.
	IdleTimeout time.Duration `json:"idleTimeout"`
	// WriteTimeout bounds each write (0 = none). go-zeromq does not close a
	// connection on a timeout, so owners must recreate the socket on errors.
	WriteTimeout time.Duration `json:"writeTimeout"`
	// DialTimeout bounds the TCP connect of one dial (default 1 s; negative
	// leaves only the socket's context and dialer timeout).
	DialTimeout time.Duration `json:"dialTimeout"`
	// MaxFrameSize is the largest frame body accepted (default 64 MiB, or
	// MaxMessageSize when that is set and smaller). A peer announcing a
	// larger frame fails its connection before any allocation.
	MaxFrameSize int64 `json:"maxFrameSize"`
	// HeartbeatInterval makes connections of go-zeromq sockets, and those a
	// Listener accepts, send a ZMTP PING this often after the handshake (0 =
	// none). libzmq peers answer PING by themselves, whatever their own
	// heartbeat settings.
	HeartbeatInterval time.Duration `json:"heartbeatInterval"`
	// HeartbeatTimeout fails such a connection with ErrPeerDead when nothing
	// at all (PONG or message) arrives within this long of an unanswered
	// PING (default 2 × HeartbeatInterval). Bytes count once they have
	// arrived, read or not: while the socket's owner is not reading (a full
	// go-zeromq queue, a paused ReadMsg), bytes waiting unread keep the peer
	// alive, since its silence cannot be seen behind them. A PING that
	// cannot go out because a message write to a peer that reads nothing
	// holds the connection (no WriteTimeout) is judged the same way, from
	// when it was due: nothing arrived within this long fails the
	// connection, and the blocked write with it. Connections answer the
	// peer's PING with PONG in any case.
	HeartbeatTimeout time.Duration `json:"heartbeatTimeout"`
	// MaxMessageSize bounds the bodies of all frames of one multipart message,
	// counting 64 bytes per frame on top (default MaxFrameSize + 1 MiB).
	MaxMessageSize int64 `json:"maxMessageSize"`
	// Clock runs the heartbeats (the PING period and the timeout of an
	// unanswered PING) and the accept loop's pause after a failed Accept;
	// nil is the wall clock. The handshake, idle, write and dial timeouts
	// are not on it: they are socket deadlines handed to the OS, which keeps
	// wall time.
	Clock telemetry.Clock `json:"-"`
	// OnHandshakeFailure, when set, is called from the handshake's own
	// goroutine for every connection a Listener dropped before Accept
	// returned it (besides the debug log and HandshakeFailures), so that
	// its owner counts them in a metric of its own.
	OnHandshakeFailure func(remote net.Addr, err error) `json:"-"`
}

// Validate reports options that cannot be honoured.
func (o Options) Validate() error {
	if o.IdleTimeout < 0 {
		return fmt.Errorf("zmqx: idleTimeout must not be negative, got %v", o.IdleTimeout)
	}
	if o.WriteTimeout < 0 {
		return fmt.Errorf("zmqx: writeTimeout must not be negative, got %v", o.WriteTimeout)
	}
	if o.HeartbeatInterval < 0 || o.HeartbeatTimeout < 0 {
		return fmt.Errorf("zmqx: heartbeat interval and timeout must not be negative, got %v and %v",
			o.HeartbeatInterval, o.HeartbeatTimeout)
	}
	if o.MaxFrameSize < 0 {
		return fmt.Errorf("zmqx: maxFrameSize must not be negative, got %d", o.MaxFrameSize)
	}
	if o.MaxMessageSize < 0 {
		return fmt.Errorf("zmqx: maxMessageSize must not be negative, got %d", o.MaxMessageSize)
	}
	if o.MaxMessageSize > 0 && o.MaxFrameSize > 0 && o.MaxMessageSize < o.MaxFrameSize {
		return fmt.Errorf("zmqx: maxMessageSize %d is below maxFrameSize %d", o.MaxMessageSize, o.MaxFrameSize)
	}
	return nil
}

// withDefaults returns o with zero fields replaced by their defaults and
// negative timeouts normalised to 0 (disabled).
func (o Options) withDefaults() Options {
	if o.HandshakeTimeout == 0 {
		o.HandshakeTimeout = DefaultHandshakeTimeout
	}
	if o.HandshakeTimeout < 0 {
		o.HandshakeTimeout = 0
	}
	if o.DialTimeout == 0 {
		o.DialTimeout = DefaultDialTimeout
	}
	if o.DialTimeout < 0 {
		o.DialTimeout = 0
	}
	if o.IdleTimeout < 0 {
		o.IdleTimeout = 0
	}
	if o.WriteTimeout < 0 {
		o.WriteTimeout = 0
	}
	if o.HeartbeatInterval < 0 {
		o.HeartbeatInterval = 0
	}
	if o.HeartbeatInterval > 0 && o.HeartbeatTimeout <= 0 {
		o.HeartbeatTimeout = 2 * o.HeartbeatInterval
	}
	if o.MaxFrameSize <= 0 {
		o.MaxFrameSize = DefaultMaxFrameSize
		if o.MaxMessageSize > 0 {
			// A message limit given alone bounds its frames too, rather
			// than being raised to the default frame limit below.
			o.MaxFrameSize = min(o.MaxFrameSize, o.MaxMessageSize)
		}
	}
	if o.Clock == nil {
		o.Clock = telemetry.Wall
	}
	if o.MaxMessageSize <= 0 {
		o.MaxMessageSize = o.MaxFrameSize + 1<<20
	}
	if o.MaxMessageSize < o.MaxFrameSize {
		o.MaxMessageSize = o.MaxFrameSize
	}
	return o
}

type optionsKey struct{}

// WithOptions returns a context carrying o. go-zeromq hands a socket's context
// to its transport on every Dial and Listen, so a socket created with this
// context (zmq4.NewSub(zmqx.WithOptions(ctx, o))) and dialed through the
// guarded scheme gets these options; other sockets are not affected.
func WithOptions(ctx context.Context, o Options) context.Context {
	return context.WithValue(ctx, optionsKey{}, o)
}

// OptionsFrom returns the options carried by ctx with defaults applied, or the
// defaults when ctx carries none.
func OptionsFrom(ctx context.Context) Options {
	o, _ := ctx.Value(optionsKey{}).(Options)
	return o.withDefaults()
}
