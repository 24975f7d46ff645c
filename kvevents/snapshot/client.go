package snapshot

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-zeromq/zmq4"

	"github.com/kvroute/kvroute/internal/clockctx"
	"github.com/kvroute/kvroute/internal/zmqx"
	"github.com/kvroute/kvroute/telemetry"
)

// Client defaults.
const (
	// DefaultAttemptTimeout bounds one request: dial, request and the whole
	// reply (vLLM builds the reply before it sends anything).
	DefaultAttemptTimeout = 30 * time.Second
	// DefaultTimeout bounds a whole load: every attempt, the backoff between
	// them and the wait for a Limiter slot.
	DefaultTimeout = 2 * time.Minute
	// DefaultBackoff is the pause after an "unavailable" answer or a failed
	// attempt.
	DefaultBackoff = 500 * time.Millisecond
	// DefaultMaxBytes caps one snapshot reply: vLLM's recorder refuses to
	// build a reply beyond 256 MiB by default.
	DefaultMaxBytes = 256 << 20
)

// Client operations: the fixed values of Error.Op (a metric label).
const (
	OpCapacity    = "capacity"    // no Limiter slot before the deadline
	OpConnect     = "connect"     // dial or handshake failed
	OpSend        = "send"        // the request could not be written
	OpReceive     = "receive"     // no reply before the attempt's deadline, or the connection broke (a reply above MaxBytes included)
	OpProtocol    = "protocol"    // the reply was not understood (ProtocolError)
	OpUnavailable = "unavailable" // the engine answered "retry later"
)

// ClientConfig configures a Client; the zero value takes every default.
type ClientConfig struct {
	// AttemptTimeout bounds one request (default 30 s): a socket
	// deadline, on wall time.
	AttemptTimeout time.Duration `json:"attemptTimeout"`
	// Timeout bounds a whole load, retries included (default 2 min), on
	// the client's clock (Options).
	Timeout time.Duration `json:"timeout"`
	// Backoff is the pause between attempts (default 500 ms).
	Backoff time.Duration `json:"backoff"`
	// MaxBytes caps one reply in bytes, counting 64 bytes per frame on top
	// of its bodies (default 256 MiB): the transport fails the connection
	// before allocating a reply beyond it.
	MaxBytes int64 `json:"maxBytes"`
	// Limiter bounds concurrent attempts process-wide; nil is
	// DefaultLimiter().
	Limiter *Limiter `json:"-"`
	// OnAttemptError, if set, is called for every failed attempt (an
	// "unavailable" answer included), e.g. to count them by Op; one the
	// caller's context cut off is marked Error.Canceled. It must not
	// block.
	OnAttemptError func(*Error) `json:"-"`
}

// Validate reports negative settings.
func (c ClientConfig) Validate() error {
	switch {
	case c.AttemptTimeout < 0:
		return fmt.Errorf("snapshot: attemptTimeout must not be negative, got %v", c.AttemptTimeout)
	case c.Timeout < 0:
		return fmt.Errorf("snapshot: timeout must not be negative, got %v", c.Timeout)
	case c.Backoff < 0:
		return fmt.Errorf("snapshot: backoff must not be negative, got %v", c.Backoff)
	case c.MaxBytes < 0:
		return fmt.Errorf("snapshot: maxBytes must not be negative, got %d", c.MaxBytes)
	}
	return nil
}

func (c ClientConfig) withDefaults() ClientConfig {
	if c.AttemptTimeout == 0 {
		c.AttemptTimeout = DefaultAttemptTimeout
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.Backoff == 0 {
		c.Backoff = DefaultBackoff
	}
	if c.MaxBytes == 0 {
		c.MaxBytes = DefaultMaxBytes
	}
	if c.Limiter == nil {
		c.Limiter = DefaultLimiter()
	}
	return c
}

// Options are the Client's injected dependencies: Logger (nil discards)
// and Clock (nil is the wall clock), which runs a load's own timers, the
// overall Timeout and the Backoff between attempts, as a replay's run on
// the replay client's clock; AttemptTimeout is the socket's deadline and
// stays wall time.
type Options struct {
	telemetry.Set
}

// Error is a failed attempt or load.
type Error struct {
	Op       string // one of the Op constants
	Addr     string
	Attempts int
	Err      error
	// Canceled: the caller's context had ended when the attempt failed,
	// and the failure is what that does to an attempt (Op OpCapacity,
	// OpConnect, OpSend or OpReceive). The caller gave the load up; the
	// engine did not fail it, so a count of the engine's errors leaves it
	// out. The client's own Timeout is not the caller's context: it fails
	// attempts uncancelled.
	Canceled bool
}

// Error describes the failure.
func (e *Error) Error() string {
	return fmt.Sprintf("snapshot %s %s (attempt %d): %v", e.Op, e.Addr, e.Attempts, e.Err)
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// ErrUnavailable is the cause of an OpUnavailable error.
var ErrUnavailable = errors.New("snapshot: engine answered unavailable, retry later")

// Client fetches snapshots. It is safe for concurrent use.
type Client struct {
	cfg  ClientConfig
	opts Options
}

// NewClient validates cfg and returns a Client.
func NewClient(cfg ClientConfig, opts Options) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Client{cfg: cfg.withDefaults(), opts: opts}, nil
}

// Config is the client's configuration with defaults applied.
func (c *Client) Config() ClientConfig { return c.cfg }

// Fetch asks addr for a snapshot until one arrives, the overall Timeout
// passes or ctx ends. "Unavailable" answers and failed attempts are
// retried after Backoff; a reply that breaks the protocol too (the engine
// may be mid-upgrade), except that it is reported under OpProtocol. The
// returned error is the last attempt's *Error.
func (c *Client) Fetch(ctx context.Context, addr string) (Reply, error) {
	caller := ctx
	ctx, cancel := clockctx.WithTimeout(ctx, c.opts.Clk(), c.cfg.Timeout)
	defer cancel()
	var last *Error
	for attempt := 1; ; attempt++ {
		r, err := c.attempt(ctx, addr)
		if err == nil {
			return r, nil
		}
		err.Attempts = attempt
		switch err.Op {
		case OpCapacity, OpConnect, OpSend, OpReceive:
			err.Canceled = caller.Err() != nil
		}
		last = err
		if c.cfg.OnAttemptError != nil {
			c.cfg.OnAttemptError(err)
		}
		c.opts.Log().Debug("snapshot attempt failed", "addr", addr, "op", err.Op, "attempt", attempt,
			"canceled", err.Canceled, "err", err.Err)
		if ctx.Err() != nil {
			return Reply{}, last
		}
		if !clockctx.Sleep(ctx, c.opts.Clk(), c.cfg.Backoff) {
			return Reply{}, last
		}
	}
}

// attempt runs one request on a fresh DEALER.
func (c *Client) attempt(ctx context.Context, addr string) (Reply, *Error) {
	fail := func(op string, err error) (Reply, *Error) { return Reply{}, &Error{Op: op, Addr: addr, Err: err} }
	if err := c.cfg.Limiter.acquire(ctx); err != nil {
		return fail(OpCapacity, fmt.Errorf("waiting for one of %d snapshot slots: %w", c.cfg.Limiter.Size(), err))
	}
	defer c.cfg.Limiter.release()
	actx, cancel := context.WithTimeout(ctx, c.cfg.AttemptTimeout)
	defer cancel()
	// The byte cap is the transport's: a frame or message beyond it fails
	// the connection before go-zeromq allocates it.
	s := zmqx.NewDealer(actx, zmqx.Options{
		MaxFrameSize:   c.cfg.MaxBytes,
		MaxMessageSize: c.cfg.MaxBytes,
	}, c.opts.Log())
	defer func() { _ = zmqx.CloseDrain(s) }()
	if err := zmqx.Dial(s, addr); err != nil {
		return fail(OpConnect, withCause(actx, err))
	}
	if err := s.Send(zmq4.NewMsgFrom(RequestFrames()...)); err != nil {
		return fail(OpSend, withCause(actx, err))
	}
	m, _, err := zmqx.Recv(s)
	if err != nil {
		return fail(OpReceive, withCause(actx, err))
	}
	r, err := ParseReply(m.Frames)
	if err != nil {
		return fail(OpProtocol, err)
	}
	if r.Unavailable {
		return fail(OpUnavailable, ErrUnavailable)
	}
	return r, nil
}

// withCause adds to an attempt's socket error why its context ended, when
// it did (the attempt's deadline, the load's Timeout on the client's clock,
// the caller): ending the context closes the socket, whose own error
// ("use of closed network connection") would otherwise hide that the
// attempt was stopped, from errors.Is as from the log.
func withCause(ctx context.Context, err error) error {
	if cause := context.Cause(ctx); cause != nil {
		return fmt.Errorf("%w (%w)", err, cause)
	}
	return err
}
