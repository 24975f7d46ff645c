package replay

import (
	"errors"
	"fmt"
)

// Operation labels carried by Error.Op. The first five are the replay values
// of the operation label of llm_d_epp_kv_cache_events_zmq_errors_total.
const (
	OpConnect    = "replay-connect"     // dial or ZMTP handshake failed
	OpCapacity   = "replay-capacity"    // no replay slot free before the deadline
	OpSend       = "replay-send"        // the request could not be sent
	OpIncomplete = "replay-incomplete"  // no END: timeout, disconnect, malformed or non-contiguous reply
	OpNoProgress = "replay-no-progress" // the last attempts delivered nothing new
	OpApply      = "replay-apply"       // the caller's apply callback failed (not a transport error)
	// OpHole: an attempt's replies skipped sequences (the publisher's send
	// queue dropped them); the next attempt asks from the first missing one.
	// Also the Op of a replay that failed after MaxHoleRetries holes.
	OpHole = "replay-hole"
)

// Reasons wrapped by Error for replies that break the protocol. Both end the
// replay at once: asking again would not change the publisher's buffer.
// (ErrNonContiguous is a sequence older than the one expected; one beyond it
// is ErrHole.)
var (
	// ErrMalformed: a reply that is not [seq8, payload] or [topic, seq8,
	// payload] after the delimiter.
	ErrMalformed = errors.New("replay: malformed reply")
	// ErrNonContiguous: a reply sequence that is not the next one expected
	// (apart from the very first batch of a replay, which may start after
	// the requested sequence when the buffer no longer holds it).
	ErrNonContiguous = errors.New("replay: non-contiguous sequence")
)

// ErrHole is wrapped by an OpHole *Error: a reply sequence beyond the next
// one expected. Unlike the errors above it is retried: vLLM's ROUTER drops
// replies past its send high-water mark, and asking again from the first
// missing sequence gets them.
var ErrHole = errors.New("replay: replies skipped sequences")

// Error describes why a replay (or one attempt of it) failed.
type Error struct {
	Op       string // one of the Op constants: what failed
	Addr     string // the replay endpoint
	Start    uint64 // the sequence the failing attempt asked for
	Attempts int    // attempts made so far
	Err      error  // the cause
	// Canceled: the caller's context had ended when the attempt failed,
	// and the failure is what that does to an attempt (Op OpCapacity,
	// OpConnect, OpSend, or OpIncomplete without a protocol violation).
	// The caller gave the replay up; the publisher did not fail it, so a
	// count of the publisher's errors leaves it out. The client's own
	// Timeout is not the caller's context: it fails attempts uncancelled.
	Canceled bool
}

// Error formats the failure with its operation and endpoint.
func (e *Error) Error() string {
	return fmt.Sprintf("replay %s from %d (attempt %d): %s: %v", e.Addr, e.Start, e.Attempts, e.Op, e.Err)
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }
