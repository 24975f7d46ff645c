package upstreamfail

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"syscall"
)

// Kind is what went wrong with a request to an upstream server, as far as
// the client may be told.
type Kind uint8

// The kinds of upstream failure.
const (
	// Other is a failure of none of the kinds below (a malformed answer, a
	// request that could not be built).
	Other Kind = iota
	// Unreachable: the server could not be connected to; it refused the
	// connection, its host or network was unreachable, or its name did not
	// resolve.
	Unreachable
	// Timeout: a deadline passed before the server connected or answered.
	Timeout
	// Closed: the server reset or closed the connection before its answer
	// was complete.
	Closed
)

// String returns the kind's name: "other", "unreachable", "timeout" or
// "closed", the label value callers build their metric labels from.
func (k Kind) String() string {
	switch k {
	case Unreachable:
		return "unreachable"
	case Timeout:
		return "timeout"
	case Closed:
		return "closed"
	}
	return "other"
}

// Text is the kind's fixed description for a client, after the name of
// the server ("the decoder " + Text()): it says what went wrong and nothing
// of where.
func (k Kind) Text() string {
	switch k {
	case Unreachable:
		return "could not be reached"
	case Timeout:
		return "did not answer in time"
	case Closed:
		return "closed the connection before answering"
	}
	return "failed to answer"
}

// Classify returns the kind of err, an error of a request to an upstream
// server. A timeout is told first (a dial that timed out is a Timeout, not
// Unreachable); an error of no known kind is Other.
func Classify(err error) Kind {
	var ne net.Error
	switch {
	case err == nil:
		return Other
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded),
		errors.As(err, &ne) && ne.Timeout():
		return Timeout
	case unreachable(err):
		return Unreachable
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.ECONNABORTED), errors.Is(err, syscall.EPIPE),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed),
		serverClosedIdle(err):
		return Closed
	}
	return Other
}

// serverClosedIdleText is the text of net/http's unexported
// errServerClosedIdle.
const serverClosedIdleText = "http: server closed idle connection"

// serverClosedIdle reports whether err is, or wraps, net/http's
// errServerClosedIdle: its Transport returns it for a request it cannot
// resend (a POST) written on a kept-alive connection that the server
// closed meanwhile, at its idle timeout (uvicorn's 5 s keep-alive in front
// of vLLM). The error is unexported, so it is told by its text.
func serverClosedIdle(err error) bool {
	for ; err != nil; err = errors.Unwrap(err) {
		if err.Error() == serverClosedIdleText {
			return true
		}
	}
	return false
}

// unreachable reports whether err is a failure to connect: a refusal, an
// unreachable host or network, a name that did not resolve, or any other
// error of the dial.
func unreachable(err error) bool {
	if errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EHOSTUNREACH) ||
		errors.Is(err, syscall.ENETUNREACH) || errors.Is(err, syscall.EHOSTDOWN) {
		return true
	}
	var dns *net.DNSError
	if errors.As(err, &dns) {
		return true
	}
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}
