package wire

import (
	"errors"
	"strconv"
)

// Sentinel errors of Decode; every error Decode returns is a *DecodeError
// wrapping exactly one of them (test with errors.Is).
var (
	// ErrTruncated: the payload ends inside a value, or a length it claims
	// exceeds the bytes that remain.
	ErrTruncated = errors.New("kvevents: truncated payload")
	// ErrMalformed: a value has the wrong msgpack type for its place, or the
	// payload has trailing bytes.
	ErrMalformed = errors.New("kvevents: malformed payload")
	// ErrLimit: the payload exceeds one of the decoder's Limits.
	ErrLimit = errors.New("kvevents: payload exceeds a decoder limit")
)

// Names of the limits reported in DecodeError.Limit.
const (
	limitPayloadBytes = "payload_bytes"
	limitEvents       = "events_per_batch"
	limitHashes       = "hashes_per_event"
	limitTokens       = "tokens_per_event"
)

// DecodeError describes why a payload was rejected. Nothing from a rejected
// payload may be applied: Decode leaves the batch empty.
type DecodeError struct {
	// Err is ErrTruncated, ErrMalformed or ErrLimit.
	Err error
	// Offset is the byte offset in the payload where decoding stopped.
	Offset int
	// Field names what was being decoded ("batch", "events", "token_ids", …).
	Field string
	// Limit, Value and Max describe an ErrLimit: which limit
	// ("payload_bytes", "events_per_batch", "hashes_per_event" or
	// "tokens_per_event"), the claimed size and the configured maximum.
	Limit      string
	Value, Max int
}

// Error formats the error; it is only called off the hot path.
func (e *DecodeError) Error() string {
	s := e.Err.Error() + ": " + e.Field + " at offset " + strconv.Itoa(e.Offset)
	if e.Limit != "" {
		s += " (" + e.Limit + " " + strconv.Itoa(e.Value) + " > " + strconv.Itoa(e.Max) + ")"
	}
	return s
}

// Unwrap returns the sentinel error.
func (e *DecodeError) Unwrap() error { return e.Err }

// Reason is a short label for metrics and logs: "truncated", "malformed" or
// "limit".
func (e *DecodeError) Reason() string {
	switch e.Err {
	case ErrTruncated:
		return "truncated"
	case ErrLimit:
		return "limit"
	}
	return "malformed"
}
