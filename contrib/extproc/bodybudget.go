package extproc

import "github.com/kvroute/kvroute/internal/bytebudget"

// DefaultMaxBodyBytesInFlight is the default of Config.MaxBodyBytesInFlight,
// the kvroute gateway's: 512 MiB of request bodies buffered at once, sixteen
// bodies at DefaultMaxBodyBytes or thousands of ordinary prompts (a
// long-context prompt is a few hundred KiB of JSON).
const DefaultMaxBodyBytesInFlight = bytebudget.DefaultBodyBytesInFlight

// appendBody adds chunk to the stream's buffered body, growing the buffer by
// doubling (never past Config.MaxBodyBytes, which the caller has checked
// the body against) and charging every growth to the Server's budget first:
// a body holds what it has sent, at most twice that, not more. It reports
// false, keeping the body as it was, when the budget has no room.
func (st *streamState) appendBody(chunk []byte) bool {
	need := len(st.body) + len(chunk)
	if need > cap(st.body) {
		next := min(max(2*cap(st.body), need), int(max(st.srv.cfg.MaxBodyBytes, int64(need))))
		buf, taken, ok := st.srv.bodies.Grow(st.body, next)
		if !ok {
			return false
		}
		st.body, st.held = buf, st.held+taken
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
	st.srv.bodies.Release(st.held)
	st.held = 0
}
