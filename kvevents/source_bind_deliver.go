package kvevents

import (
	"errors"
	"sync/atomic"

	"github.com/kvroute/kvroute/internal/zmqx"
)

// deliver counts or hands over one well-formed message. An endpoint
// removed (or changed) since its topic was resolved has it resolved again,
// so nothing is counted under the ID of an endpoint that left the pool:
// its series are gone for good.
func (b *binder) deliver(bc *bindConn, seq uint64, frames [][]byte) {
	p := b.p
	for {
		e := b.resolve(bc, frames[0])
		if h := bindResolvedHook.Load(); h != nil {
			(*h)()
		}
		switch {
		case e.refused:
			p.m.BindSourceMismatch.Inc()
		case e.st == nil && e.id != "":
			// A configured endpoint: its ID is no wire value.
			if !b.countDrop(bc, e) {
				continue
			}
		case e.st == nil:
			p.m.BindUnknown.Inc()
		default:
			owned, took := b.own(e.st, bc)
			if !owned {
				p.m.BindForeign.Inc()
				return
			}
			if took {
				// A new engine connection for the endpoint: checked as a
				// reconnection in per-endpoint mode (replay from the
				// watermark itself, compare the digest), before its
				// first message is sequenced.
				e.st.onConnect(false)
			}
			if !e.st.whileOpen(func() {
				if e.unknownModel {
					p.m.TopicModelUnknown.WithLabelValues(e.st.id).Inc()
				}
				e.st.receiveOpen(seq, frames[1][8:], e.tm, frames[2], e.model)
			}) {
				continue // closed since: resolved again
			}
		}
		return
	}
}

// countDrop counts a message of a configured endpoint that is not indexed
// under its ID, unless the endpoints changed since bc resolved it (it is
// then resolved again).
func (b *binder) countDrop(bc *bindConn, e bindEntry) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.gen.Load() != bc.cgen {
		return false
	}
	b.p.m.drop(e.id, e.reason, 1)
	return true
}

// own makes bc the connection of st unless another live connection owns
// it; owned false means the message must be dropped, took that bc has just
// become st's connection.
func (b *binder) own(st *stream, bc *bindConn) (owned, took bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch o := b.owners[st]; o {
	case bc:
		return true, false
	case nil:
		if st.closed.Load() {
			// Closed since the topic was resolved (and released by
			// closeStream, or about to be): nothing is applied to it,
			// and it is not registered again.
			return true, false
		}
		b.owners[st] = bc
		bc.owned = append(bc.owned, st)
		st.setConnected(true)
		return true, true
	}
	return false, false
}

// disown releases the streams of a connection that ended; err is why it
// ended (nil when the pool closed it). It runs after the connection's last
// receive, so the next owner's receives follow it. The loss of a
// connection that owned endpoints is counted as a recv error of each of
// them (their state shows them disconnected); any other as one of the
// bind address. A quiet connection closed by the idle deadline (heartbeats
// off) counts nothing.
func (b *binder) disown(bc *bindConn, err error) {
	p := b.p
	b.mu.Lock()
	var lost []string
	for _, st := range bc.owned {
		if b.owners[st] == bc {
			delete(b.owners, st)
			st.setConnected(false)
			if !st.closed.Load() {
				lost = append(lost, st.id)
			}
		}
	}
	bc.owned = nil
	b.mu.Unlock()
	if err == nil {
		return
	}
	if isTimeout(err) && !errors.Is(err, zmqx.ErrPeerDead) {
		// The idle deadline (heartbeats off) closed a quiet connection:
		// routine, as in per-endpoint mode; libzmq reconnects.
		p.log.Debug("No KV events within the idle deadline; engine connection closed", "rank", bc.rank,
			"remote", bc.from, "endpoints", lost)
		return
	}
	if len(lost) == 0 {
		p.m.ZMQErrors.WithLabelValues(p.cfg.BindAddress, "recv").Inc()
		p.log.Debug("KV-event connection to the bind socket ended", "rank", bc.rank, "remote", bc.from, "err", err)
		return
	}
	for _, id := range lost {
		p.m.ZMQErrors.WithLabelValues(id, "recv").Inc()
	}
	p.log.Warn("KV-event engine connection to the bind socket lost", "rank", bc.rank, "remote", bc.from,
		"endpoints", lost, "err", err)
}

// bindResolvedHook, when set (by tests), runs after the bind loop resolved
// a message's topic and before it counts or delivers the message: a test
// orders an endpoint's removal between the two.
var bindResolvedHook atomic.Pointer[func()]
