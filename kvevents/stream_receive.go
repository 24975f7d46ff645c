package kvevents

import (
	"time"
)

// receive handles one well-formed live message on the receiver goroutine.
func (st *stream) receive(seq uint64, payload []byte, model string) {
	st.receiveFrame(seq, nil, topicMeta{}, payload, model)
}

// receiveFrame is receive for a message whose sequence frame carried the
// publisher identity (frameID; nil when it did not) and whose topic told
// tm. A closed stream receives nothing.
func (st *stream) receiveFrame(seq uint64, frameID []byte, tm topicMeta, payload []byte, model string) {
	st.whileOpen(func() { st.receiveOpen(seq, frameID, tm, payload, model) })
}

// whileOpen runs f, the receiver's handling of one message, unless the
// stream is closed; it reports whether it ran. close waits for a running
// f, so nothing the receiver counts under the endpoint's ID follows the
// removal of its series.
func (st *stream) whileOpen(f func()) bool {
	st.recvMu.RLock()
	defer st.recvMu.RUnlock()
	if st.closed.Load() {
		return false
	}
	f()
	return true
}

// receiveOpen is receiveFrame on an open stream (whileOpen).
func (st *stream) receiveOpen(seq uint64, frameID []byte, tm topicMeta, payload []byte, model string) {
	st.received.Inc()
	if st.liveReset.Load() && st.liveReset.Swap(false) {
		st.hasLive = false  // a replay found a restart: this is the new lifetime
		st.lv.hasID = false // whose identity this message tells
		st.forgetLiveIdentity()
	}
	st.observePublisher(frameID, tm, payload)
	if st.hasLive {
		if seq == st.lastLive {
			st.p.m.drop(st.id, dropStaleSeq, 1)
			return
		}
		if seq < st.lastLive {
			st.restart(st.lastLive, seq)
		}
	}
	st.lastLive, st.hasLive = seq, true
	if m := st.liveModel.Load(); m == nil || *m != model {
		st.liveModel.Store(&model)
	}
	st.lastSeen.Store(seq)
	st.seen.Store(true)
	if !st.liveConn.Load() {
		st.liveConn.Store(true)
	}
	it := item{st: st, gen: st.gen.Load(), seq: seq, model: model, payload: payload, tr: st.traceReceive(seq, payload)}
	st.inQueue.Add(1) // before the worker can take it (handle)
	queued := st.w.enqueue(it)
	it.tr.endReceive(queued)
	if !queued {
		st.inQueue.Add(-1)
		st.queueFull.Inc()
		st.requestCatchUp()
	}
}

// restart starts a new publisher lifetime: the old stream's entries, held
// messages and replay are dropped.
func (st *stream) restart(prev, seq uint64) {
	st.sequenced(func() { st.restartLocked(prev, seq) })
}

func (st *stream) restartLocked(prev, seq uint64) {
	s := &st.s
	if s.closed {
		return
	}
	if st.liveReset.Swap(false) {
		// A replay found this same restart (no matching batch at the
		// watermark) after the receiver had compared seq but before it got
		// the lock: the endpoint is already cleared and replaying the new
		// lifetime from 0. Clearing again would count one restart twice.
		return
	}
	st.bumpGenLocked()
	removed := st.clearLocked()
	s.needJoin, s.restarted = true, true
	s.cooldownUntil = time.Time{}
	st.p.m.PublisherRestarts.WithLabelValues(st.id).Inc()
	st.log.Info("Publisher restarted: sequence went backwards; endpoint cleared",
		"previous_seq", prev, "seq", seq, "blocks_removed", removed)
}

// requestCatchUp is called by the receiver after a queue dropped a message:
// the endpoint catches up by a replay from its watermark (not a Resync, which
// rebuilds it from 0).
func (st *stream) requestCatchUp() {
	if st.rc == nil {
		return // the gap is counted when the next message is applied
	}
	st.sequenced(func() {
		if st.s.closed {
			return
		}
		if st.s.replaying {
			st.s.catchUp = true
			return
		}
		st.catchUpLocked()
	})
}
