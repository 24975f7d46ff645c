package admission

import "errors"

// The admission's refusals. Admit returns one of them (possibly wrapped;
// test with errors.Is), or the context's error when the caller gave up.
var (
	// ErrShed refuses a sheddable request (negative priority): no candidate
	// was free when it arrived, or a full queue pushed it out. Gateways
	// answer 429 with Retry-After.
	ErrShed = errors.New("admission: sheddable request shed under saturation")
	// ErrQueueFull refuses a request the full queue could not take:
	// pushing out its sheddable requests would not make room, so none was.
	// Gateways answer 429 with Retry-After.
	ErrQueueFull = errors.New("admission: queue full")
	// ErrExpired refuses a request whose queue deadline passed before any
	// candidate became free. Gateways answer 503.
	ErrExpired = errors.New("admission: queue deadline passed before an endpoint was free")
	// ErrClosed refuses requests after Close (and those queued at Close).
	// Gateways answer 503.
	ErrClosed = errors.New("admission: closed")
)

// Reason names the outcome err stands for, as counted in the metrics and
// sent in the gateway's x-kvroute-admission header: "shed", "queue_full",
// "expired", "closed", or "" for any other error (nil included).
func Reason(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, ErrShed):
		return outcomeShed
	case errors.Is(err, ErrQueueFull):
		return outcomeQueueFull
	case errors.Is(err, ErrExpired):
		return outcomeExpired
	case errors.Is(err, ErrClosed):
		return outcomeClosed
	}
	return ""
}
