package replay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/kvroute/kvroute/internal/clockctx"
	"github.com/kvroute/kvroute/internal/zmqx"
	"github.com/kvroute/kvroute/telemetry"
)

// Client defaults, the replay limits llm-d's subscriber uses.
const (
	DefaultTimeout                    = 2 * time.Minute
	DefaultIdleTimeout                = 2 * time.Second
	DefaultBackoff                    = 100 * time.Millisecond
	DefaultMaxAttemptsWithoutProgress = 3
	DefaultMaxHoleRetries             = 32
)

// ClientConfig configures a Client. The zero value gives the defaults.
type ClientConfig struct {
	// Timeout bounds a whole replay, attempts, backoff and waiting for a
	// Limiter slot included (default 2 min).
	Timeout time.Duration `json:"timeout"`
	// IdleTimeout fails an attempt when no data arrives for this long; it is
	// re-armed by every read (default 2 s).
	IdleTimeout time.Duration `json:"idleTimeout"`
	// Backoff is the pause between attempts (default 100 ms).
	Backoff time.Duration `json:"backoff"`
	// MaxAttemptsWithoutProgress ends the replay after that many consecutive
	// attempts that delivered no new batch (default 3).
	MaxAttemptsWithoutProgress int `json:"maxAttemptsWithoutProgress"`
	// MaxHoleRetries bounds the re-requests of one replay after replies that
	// skipped sequences (default 32). vLLM's replay ROUTER drops replies
	// beyond its send high-water mark (about 1,000 queued), so a long replay
	// arrives with holes; each hole ends the attempt at once and, after
	// Backoff, the next one asks from the first missing sequence. Beyond
	// this many the replay fails (OpHole, wrapping ErrHole).
	MaxHoleRetries int `json:"maxHoleRetries"`
	// HandshakeTimeout bounds the ZMTP handshake (default 1 s).
	HandshakeTimeout time.Duration `json:"handshakeTimeout"`
	// MaxFrameSize is the largest reply frame accepted (default 64 MiB).
	MaxFrameSize int64 `json:"maxFrameSize"`

	// Limiter bounds concurrent attempts; nil means DefaultLimiter().
	Limiter *Limiter `json:"-"`
	// OnAttemptError, if set, is called for every failed attempt (including
	// the last one), e.g. to count errors per operation; one the caller's
	// context cut off is marked Error.Canceled. It must not block.
	OnAttemptError func(*Error) `json:"-"`
	// OnSlotWait, if set, is called once per attempt with how long it waited
	// for a Limiter slot (also when the wait failed), e.g. to observe a
	// histogram. It must not block.
	OnSlotWait func(time.Duration) `json:"-"`
}

// Validate reports invalid settings.
func (c ClientConfig) Validate() error {
	switch {
	case c.Timeout < 0:
		return fmt.Errorf("replay: timeout must not be negative, got %v", c.Timeout)
	case c.IdleTimeout < 0:
		return fmt.Errorf("replay: idleTimeout must not be negative, got %v", c.IdleTimeout)
	case c.Backoff < 0:
		return fmt.Errorf("replay: backoff must not be negative, got %v", c.Backoff)
	case c.MaxAttemptsWithoutProgress < 0:
		return fmt.Errorf("replay: maxAttemptsWithoutProgress must not be negative, got %d", c.MaxAttemptsWithoutProgress)
	case c.MaxHoleRetries < 0:
		return fmt.Errorf("replay: maxHoleRetries must not be negative, got %d", c.MaxHoleRetries)
	case c.HandshakeTimeout < 0:
		return fmt.Errorf("replay: handshakeTimeout must not be negative, got %v", c.HandshakeTimeout)
	case c.MaxFrameSize < 0:
		return fmt.Errorf("replay: maxFrameSize must not be negative, got %d", c.MaxFrameSize)
	}
	return nil
}

func (c ClientConfig) withDefaults() ClientConfig {
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.IdleTimeout == 0 {
		c.IdleTimeout = DefaultIdleTimeout
	}
	if c.Backoff == 0 {
		c.Backoff = DefaultBackoff
	}
	if c.MaxAttemptsWithoutProgress == 0 {
		c.MaxAttemptsWithoutProgress = DefaultMaxAttemptsWithoutProgress
	}
	if c.MaxHoleRetries == 0 {
		c.MaxHoleRetries = DefaultMaxHoleRetries
	}
	if c.Limiter == nil {
		c.Limiter = DefaultLimiter()
	}
	return c
}

// Options are the injected dependencies of a Client or a Server; the zero
// value is valid.
type Options struct {
	// Set is the observability bundle (registerer, logger, tracer
	// provider, clock; see package telemetry):
	//   Registerer receives a Server's kvroute_replay_server_* metrics; nil
	//   registers none. (A Client has no metrics of its own: count its
	//   failures with ClientConfig.OnAttemptError.)
	//   Logger receives a Client's go-zeromq messages and attempt failures, and
	//   a Server's connection-level events, at debug level; nil discards.
	//   Clock runs a Client's Timeout and Backoff; the handshake and idle
	//   timeouts are socket deadlines and stay wall time.
	telemetry.Set
}

// Client replays KV-event batches from publishers' replay sockets. It is safe
// for concurrent use; each Replay uses its own sockets.
type Client struct {
	cfg   ClientConfig
	log   *slog.Logger
	clock telemetry.Clock // of Timeout and Backoff
	opts  zmqx.Options
}

// NewClient validates cfg and returns a Client with its injected
// dependencies.
func NewClient(cfg ClientConfig, opts Options) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	return &Client{cfg: cfg, log: opts.Log(), clock: opts.Clk(), opts: zmqx.Options{
		Clock:            opts.Clk(),
		HandshakeTimeout: cfg.HandshakeTimeout,
		IdleTimeout:      cfg.IdleTimeout,
		WriteTimeout:     cfg.IdleTimeout,
		MaxFrameSize:     cfg.MaxFrameSize,
	}}, nil
}

// Result describes what a replay delivered. It is meaningful with or without
// an error: after a failure it says how far the replay got.
type Result struct {
	Start    uint64 // the requested start sequence
	First    uint64 // the first sequence replayed (when Batches > 0)
	Next     uint64 // the sequence expected next: last replayed + 1, or Start
	Batches  int    // batches passed to apply
	Attempts int    // attempts made
	Layout   Layout // reply layout seen ("" before the first reply)
	// Covered reports whether the publisher still held the requested start:
	// the first replayed sequence equals Start, or nothing was replayed and
	// Start is 0 (a fresh publisher). False means sequences from Start to
	// First-1 are lost; with Batches == 0 and Start > 0 the buffer either
	// expired or holds nothing newer, which only the caller can tell apart.
	Covered bool
	// Holes counts the attempts that ended at a hole: a reply whose sequence
	// was beyond the next one expected (the publisher's send queue dropped
	// the replies between). Each was followed by a request from the first
	// missing sequence (at most MaxHoleRetries).
	Holes int
	// Highest is the highest sequence any reply carried, delivered or not
	// (replies past a hole are not delivered): the publisher had published
	// at least that far. Meaningful when Batches > 0 or Holes > 0.
	Highest uint64
}

// Outcome is the result label of kvroute_kv_events_replays_total for a replay
// that returned no error: "complete" when covered, else "partial". A replay
// that returned an error is "failed".
func (r Result) Outcome() string {
	if r.Covered {
		return "complete"
	}
	return "partial"
}

// Replay asks the replay socket at addr ("host:port" or "tcp://host:port")
// for every buffered batch from start and calls apply for each, in sequence
// order, until the END sentinel. apply may retain payload. The first call's
// seq is greater than start when the publisher's buffer no longer holds
// start (Result.Covered is then false); callers that must not mix lost and
// replayed state can react there, before anything is applied.
//
// An interrupted attempt (timeout, disconnect) is retried after Backoff from
// the next sequence expected. So is an attempt whose replies skip sequences
// (a hole: vLLM's ROUTER drops replies past its send high-water mark): the
// attempt stops reading at the first skipped sequence, closes its socket
// (the rest of that reply would be sent again anyway) and, after Backoff,
// the next attempt asks from the first missing sequence, so every round
// delivers at least what the publisher's send queue holds and nothing is read
// twice. The first batch of such a re-request may be later than asked when
// the buffer moved past it meanwhile: apply then sees the jump, as on the
// first call. The replay fails after MaxAttemptsWithoutProgress attempts in a
// row that delivered nothing, after MaxHoleRetries holes, when Timeout
// expires, on a malformed reply or one older than asked, or when apply
// fails. Errors are *Error.
func (c *Client) Replay(ctx context.Context, addr string, start uint64, apply func(seq uint64, payload []byte) error) (Result, error) {
	return c.ReplayBatches(ctx, addr, start, func(b Batch) error { return apply(b.Seq, b.Payload) })
}

// Batch is one replayed batch as ReplayBatches delivers it.
type Batch struct {
	Seq     uint64
	Payload []byte
	// Topic is the reply's topic frame (LayoutCurrent), nil in the legacy
	// layout, which carries none. It names the model when the publisher's
	// topic does (kv@<endpoint>@<model>).
	Topic []byte
}

// ReplayBatches is Replay with the reply's topic: apply receives each batch
// with its topic frame, so a caller that does not know the endpoint's model
// can take it from there.
func (c *Client) ReplayBatches(ctx context.Context, addr string, start uint64, apply func(Batch) error) (Result, error) {
	caller := ctx
	ctx, cancel := clockctx.WithTimeout(ctx, c.clock, c.cfg.Timeout)
	defer cancel()
	res := Result{Start: start, Next: start}
	noProgress := 0
	for {
		res.Attempts++
		before := res.Batches
		err := c.attempt(ctx, addr, &res, apply)
		if err == nil {
			return res, nil
		}
		err.Canceled = caller.Err() != nil && interruptible(err)
		c.report(err)
		if err.Op == OpApply || ctx.Err() != nil ||
			errors.Is(err, ErrMalformed) || errors.Is(err, ErrNonContiguous) {
			return res, err
		}
		if err.Op == OpHole {
			res.Holes++
			if res.Holes > c.cfg.MaxHoleRetries {
				return res, &Error{Op: OpHole, Addr: addr, Start: res.Next, Attempts: res.Attempts,
					Err: fmt.Errorf("%d holes, the last: %w", res.Holes, err.Err)}
			}
		}
		if res.Batches > before {
			noProgress = 0
		} else {
			noProgress++
		}
		if noProgress >= c.cfg.MaxAttemptsWithoutProgress {
			return res, &Error{Op: OpNoProgress, Addr: addr, Start: res.Next, Attempts: res.Attempts,
				Err: fmt.Errorf("%d attempts without progress, last: %w", noProgress, err)}
		}
		if !clockctx.Sleep(ctx, c.clock, c.cfg.Backoff) {
			return res, err
		}
	}
}

// interruptible reports whether err is what an attempt ends with when its
// context ends (no slot, dial, send or reply cut off), rather than the
// publisher's answer (a reply that breaks the protocol, a hole) or the
// caller's apply.
func interruptible(err *Error) bool {
	switch err.Op {
	case OpCapacity, OpConnect, OpSend:
		return true
	case OpIncomplete:
		return !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrNonContiguous)
	}
	return false
}

func (c *Client) report(err *Error) {
	c.log.Debug("replay attempt failed", "addr", err.Addr, "op", err.Op, "start", err.Start,
		"attempt", err.Attempts, "canceled", err.Canceled, "err", err.Err)
	if c.cfg.OnAttemptError != nil {
		c.cfg.OnAttemptError(err)
	}
}

// attempt runs one request on a fresh DEALER. It returns nil when END arrived.
func (c *Client) attempt(ctx context.Context, addr string, res *Result, apply func(Batch) error) *Error {
	fail := func(op string, err error) *Error {
		return &Error{Op: op, Addr: addr, Start: res.Next, Attempts: res.Attempts, Err: err}
	}
	waited, err := c.cfg.Limiter.acquire(ctx)
	if c.cfg.OnSlotWait != nil {
		c.cfg.OnSlotWait(waited)
	}
	if err != nil {
		return fail(OpCapacity, fmt.Errorf("waiting for one of %d replay slots: %w", c.cfg.Limiter.Size(), err))
	}
	defer c.cfg.Limiter.release()

	// The socket's context is its lifeline: the replay deadline bounds Dial
	// retries and every Recv; the transport's idle deadline bounds each read.
	sctx, scancel := context.WithCancel(ctx)
	defer scancel()
	s := zmqx.NewDealer(sctx, c.opts, c.log)
	defer func() { _ = zmqx.CloseDrain(s) }()

	if err := zmqx.Dial(s, addr); err != nil {
		return fail(OpConnect, err)
	}
	if err := s.Send(zmq4.NewMsgFrom(RequestFrames(res.Next)...)); err != nil {
		return fail(OpSend, err)
	}
	before := res.Batches
	for {
		m, err := s.Recv()
		if err != nil {
			return fail(OpIncomplete, fmt.Errorf("no END after %d batches: %w", res.Batches, err))
		}
		if zmqx.IsCommand(m) {
			continue
		}
		r, err := parseReply(m.Frames)
		if err != nil {
			return fail(OpIncomplete, err)
		}
		res.Layout = r.layout
		if !r.end {
			res.Highest = max(res.Highest, r.seq)
		}
		if r.end {
			if res.Batches == 0 {
				res.Covered = res.Start == 0
			}
			return nil
		}
		switch {
		case r.seq == res.Next:
		case r.seq > res.Next && res.Batches == before:
			// The first reply of a request: the buffer starts after the
			// requested sequence (it is never a send-queue drop, the queue
			// being empty then). Replay what is left; apply sees the loss.
		case r.seq > res.Next:
			return fail(OpHole, fmt.Errorf("%w: got %d, want %d", ErrHole, r.seq, res.Next))
		default:
			return fail(OpIncomplete, fmt.Errorf("%w: got %d, want %d", ErrNonContiguous, r.seq, res.Next))
		}
		if res.Batches == 0 {
			res.First = r.seq
			res.Covered = r.seq == res.Start
		}
		if err := apply(Batch{Seq: r.seq, Payload: r.payload, Topic: r.topic}); err != nil {
			return fail(OpApply, err)
		}
		res.Batches++
		res.Next = r.seq + 1
	}
}
