package kvevents

import (
	"errors"
	"fmt"
)

// errNoReplay is returned by Resync for an endpoint without a replay
// address: nothing can rebuild its entries.
var errNoReplay = errors.New("kvevents: endpoint has no replay address")

// Resync rebuilds the endpoint's index entries from its publisher's replay
// buffer: the entries are cleared and the buffer is replayed from sequence
// 0, as after a publisher restart. It is for an endpoint whose entries are
// known to be wrong although its sequence never skipped (a router comparing
// its predictions with the engine's reported cache hits, for instance):
// blocks the buffer no longer holds stay unknown until the engine stores
// them again, which is better than stale.
//
// A Resync always starts over: a replay already running (and the live
// messages held behind it) is cancelled, since it would only extend entries
// the operator has declared wrong, and the replay from 0 covers everything
// it would have applied. Resync is the only thing kvevents calls a resync;
// the replay from the watermark after a queue dropped a message is a
// catch-up, which keeps the entries. It returns an error for an unknown
// endpoint or one without a replay address.
func (p *Pool) Resync(id string) error {
	st := p.stream(id)
	if st == nil {
		return fmt.Errorf("kvevents: resync of unknown endpoint %q", id)
	}
	if st.rc == nil {
		return fmt.Errorf("%w: %s", errNoReplay, id)
	}
	closed := true
	st.sequenced(func() {
		if closed = st.s.closed; closed {
			return
		}
		st.bumpGenLocked() // drops a running replay and held messages: the replay from 0 covers them
		removed := st.clearLocked()
		st.log.Info("Resynchronising the endpoint from its replay buffer on request", "blocks_removed", removed)
		st.startReplayLocked(st.planReplayLocked(trigResync, 0))
	})
	if closed {
		return fmt.Errorf("kvevents: resync of closed endpoint %q", id)
	}
	return nil
}
