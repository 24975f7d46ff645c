package kvevents

import "github.com/kvroute/kvroute/kvevents/wire"

// drainCoveredLocked applies, during a replay, the held live messages the
// replay has covered up to, so they do not wait for the replay to end. It
// reports whether nothing is held any more (and live messages were held):
// the replay then has nothing left to wait for.
func (st *stream) drainCoveredLocked(dec *wire.Decoder, b *wire.Batch) bool {
	s := &st.s
	if len(s.held) == 0 || !s.has {
		return false
	}
	i := 0
	for ; i < len(s.held) && s.held[i].seq <= s.applied+1; i++ {
		st.sequenceLocked(s.held[i], dec, b)
	}
	if i == 0 {
		return false
	}
	for _, it := range s.held[:i] {
		s.heldBytes -= it.size()
	}
	s.held = s.held[i:]
	return len(s.held) == 0
}

// drainHeldLocked runs the messages held during the replay through the
// sequencing rules, in arrival order. If one of them starts another replay,
// the rest are held again.
func (st *stream) drainHeldLocked(dec *wire.Decoder, b *wire.Batch) {
	held := st.s.held
	st.s.held, st.s.heldBytes = nil, 0
	for i := range held {
		if st.s.replaying {
			for _, it := range held[i:] {
				st.s.held = append(st.s.held, it)
				st.s.heldBytes += it.size()
			}
			return
		}
		st.sequenceLocked(held[i], dec, b)
	}
}
