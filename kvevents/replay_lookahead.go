package kvevents

import "math"

// replayLimit is the highest sequence a replay from `from` may deliver
// while the live stream shows messages on the current connection:
// ReplayLookahead beyond the highest sequence the live stream or the
// request has shown. The sequence a plan knows to exist is not part of
// it: a repair's is the end of a hole, told by an earlier replay's
// replies, and a bogus one must not widen the bound the replay is held
// to.
func (st *stream) replayLimit(from uint64) uint64 {
	return addSat(max(st.lastSeen.Load(), from), st.p.cfg.ReplayLookahead)
}

// addSat is a+b, or the largest sequence when that overflows: a lookahead
// of 2^64-1 is no bound, and a sequence near the top of the range (a
// hostile publisher's) does not wrap the bound to a small one.
func addSat(a, b uint64) uint64 {
	if a > math.MaxUint64-b {
		return math.MaxUint64
	}
	return a + b
}
