package extproc

import (
	"sync/atomic"
)

// DefaultMaxBodyBytesInFlight is the default of Config.MaxBodyBytesInFlight,
// the kvroute gateway's: 512 MiB of request bodies buffered at once, sixteen
// bodies at DefaultMaxBodyBytes or thousands of ordinary prompts (a
// long-context prompt is a few hundred KiB of JSON).
const DefaultMaxBodyBytesInFlight = 512 << 20

// byteBudget bounds the bytes that the request bodies of all streams hold
// together. It is a counter, not a queue: a stream that finds no room is
// refused at once rather than made to wait while Envoy holds its request.
type byteBudget struct {
	limit int64
	used  atomic.Int64
}

// acquire takes n bytes of the budget and reports whether they were free.
func (b *byteBudget) acquire(n int64) bool {
	for {
		u := b.used.Load()
		if u+n > b.limit {
			return false
		}
		if b.used.CompareAndSwap(u, u+n) {
			return true
		}
	}
}

// release returns n bytes taken by acquire.
func (b *byteBudget) release(n int64) {
	if n != 0 {
		b.used.Add(-n)
	}
}

// inUse returns the bytes currently taken.
func (b *byteBudget) inUse() int64 { return b.used.Load() }

// appendBody adds chunk to the stream's buffered body, growing the buffer by
// doubling (never past Config.MaxBodyBytes, which the caller has checked
// the body against) and charging every growth to the Server's budget first:
// a body holds what it has sent, at most twice that, not more. It reports
// false, keeping the body as it was, when the budget has no room.
func (st *streamState) appendBody(chunk []byte) bool {
	need := len(st.body) + len(chunk)
	if need > cap(st.body) {
		next := min(max(2*cap(st.body), need), int(max(st.srv.cfg.MaxBodyBytes, int64(need))))
		grow := int64(next - cap(st.body))
		if !st.srv.bodies.acquire(grow) {
			return false
		}
		st.held += grow
		buf := make([]byte, len(st.body), next)
		copy(buf, st.body)
		st.body = buf
	}
	st.body = append(st.body, chunk...)
	return true
}

// dropBody lets go of the stream's buffered body and returns its share of
// the budget. It runs once the body is no longer the picker's to hold: on
// the first response-phase message (Envoy has taken the body it was sent
// back, since the upstream answered) and at the stream's end, whatever
// ended it.
func (st *streamState) dropBody() {
	st.body, st.req.Body = nil, nil
	st.srv.bodies.release(st.held)
	st.held = 0
}
