package kvevents

import (
	"encoding/hex"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/kvroute/kvroute/kvevents/wire"
	"github.com/kvroute/kvroute/telemetry"
)

// liveness is what a stream knows of its publisher's identity and
// heartbeats (vLLM's snapshot revision, vllm-project/vllm#57789; SGLang's
// topic epoch, topic_epoch.go, is an identity without heartbeats).
//
// Identity: the publisher sends a 16-byte publisher_id that changes only
// when it restarts (as the batch's fourth element; an earlier draft
// appended it to the sequence frame). A new identity is a new engine
// lifetime, whatever the sequence says: the receiver clears the endpoint
// and replays from 0 at once, as for a sequence that goes backwards, and
// so also catches a restart that happened while it was disconnected
// without waiting for the reconnect replay's digest check (which still
// runs, and remains the only restart check for engines without an
// identity).
//
// Heartbeats: with snapshots on, an idle publisher sends an empty batch
// every second. Once a stream has seen vLLM's identity or a heartbeat
// (SGLang's epoch does not count, nor do its snapshot barriers), its
// publisher is expected to be heard at least that often: silence for
// PoolConfig.PublisherSilence marks the endpoint degraded (even while its
// TCP connection and ZMTP heartbeats are fine — a wedged publisher thread),
// counted in kvroute_kv_events_heartbeat_timeouts_total, until the next
// message arrives. The check runs on the pool's clock (a timer armed by
// the receiver), so tests drive it with telemetry.Manual.
type liveness struct {
	// Receiver-only.
	id    [16]byte
	hasID bool

	// cur is the last identity the receiver saw, for the worker: that of
	// the lifetime the live stream continues (nil while none is known, and
	// once a replay found a restart). A snapshot of another identity is
	// refused (claimSnapshotLocked).
	cur atomic.Pointer[[16]byte]
	// snapID is the identity of the snapshot the endpoint's entries were
	// loaded from (nil once they are cleared): the first identity the
	// receiver sees must be it, or the endpoint is restarted.
	snapID atomic.Pointer[[16]byte]

	watched   atomic.Bool  // the publisher sends vLLM's identities or heartbeats: its silence is checked
	armed     atomic.Bool  // the silence timer is pending
	silent    atomic.Bool  // the publisher fell silent: the endpoint is degraded
	lastHeard atomic.Int64 // pool-clock unix nanos of the last message of a watched publisher
	shownID   atomic.Pointer[[16]byte]

	timer telemetry.Timer // guarded by stream.mu
}

// observePublisher runs on the receiver for every well-formed message,
// before the sequence checks: frameID is the identity an extended sequence
// frame carried (nil when none), tm what the message's topic told. It
// reports whether the message starts a new publisher lifetime (the
// endpoint has been cleared and the receiver's sequence watermark
// forgotten).
//
// SGLang's topic epoch is an identity like vLLM's publisher_id, but SGLang
// sends no idle heartbeats: its publisher is not judged by its silence,
// and its snapshot barriers (empty batches) are not heartbeats.
func (st *stream) observePublisher(frameID []byte, tm topicMeta, payload []byte) bool {
	lv := &st.lv
	var id [16]byte
	hasID := len(frameID) == len(id)
	if hasID {
		copy(id[:], frameID)
	}
	h, err := wire.PeekHeader(payload)
	if err == nil && !hasID && h.HasPublisherID {
		id, hasID = h.PublisherID, true
	}
	beats := hasID // vLLM's identities come with idle heartbeats
	if !hasID && tm.epoch != nil {
		id, hasID = *tm.epoch, true
	}
	heartbeat := err == nil && h.Events == 0 && !tm.barrier
	if heartbeat {
		st.p.sm.lv.Heartbeats.WithLabelValues(st.id).Inc()
	}
	restarted := false
	if hasID {
		if c := lv.cur.Load(); c == nil || *c != id {
			// Before a restart (a snapshot loaded for it is this
			// lifetime's) and before looking at snapID
			// (claimSnapshotLocked does the converse).
			cur := id
			lv.cur.Store(&cur)
		}
		switch {
		case lv.hasID && id != lv.id:
			st.identityChanged(lv.id, id)
			restarted = true
		case !lv.hasID:
			if sid := lv.snapID.Load(); sid != nil && *sid != id {
				// The entries are another lifetime's snapshot, loaded
				// before the live stream showed an identity.
				st.identityChanged(*sid, id)
				restarted = true
			}
		}
		if !lv.hasID || restarted {
			shown := id
			lv.shownID.Store(&shown)
		}
		lv.id, lv.hasID = id, true
	}
	switch {
	case beats || heartbeat:
		if !lv.watched.Load() {
			lv.watched.Store(true)
		}
	case err == nil && lv.watched.Load():
		// A batch without vLLM's identity: the publisher no longer sends
		// them (an engine rolled back to a release without snapshots, or
		// SGLang's), so its silence is normal again. A payload whose header does not decode
		// tells nothing of that (it is counted as a decode error when
		// applied): the publisher stays watched.
		st.unwatch()
	}
	if lv.watched.Load() && st.p.cfg.PublisherSilence > 0 {
		st.heard()
	}
	return restarted
}

// identityChanged starts the new publisher lifetime id on the receiver:
// the endpoint, whose entries are those of lifetime prev, is cleared and
// rebuilt (identityRestartLocked).
func (st *stream) identityChanged(prev, id [16]byte) {
	st.p.sm.lv.IdentityChanges.WithLabelValues(st.id).Inc()
	st.sequenced(func() { st.identityRestartLocked(prev, id) })
	st.hasLive = false // the sequence restarts with the lifetime
}

// forgetLiveIdentity forgets which lifetime the live stream continues:
// a replay found that the publisher restarted, and the next live message
// tells the new lifetime's identity.
func (st *stream) forgetLiveIdentity() { st.lv.cur.Store(nil) }

// claimSnapshotLocked checks that a snapshot of publisher id, about to be
// applied to the cleared endpoint, continues the live stream: it is
// refused (foreignSnapshotLocked) when the live stream shows another
// identity. Otherwise id becomes the identity of the endpoint's entries,
// against which the receiver checks the first identity it sees.
func (st *stream) claimSnapshotLocked(id [16]byte) error {
	lv := &st.lv
	lv.snapID.Store(&id) // before looking at cur: observePublisher does the converse
	if err := st.foreignSnapshotLocked(id); err != nil {
		lv.snapID.Store(nil)
		return err
	}
	return nil
}

// foreignSnapshotLocked refuses, counted (reason "publisher_mismatch"), a
// snapshot of publisher id when the live stream shows another identity.
// applySnapshot asks it before clearing the endpoint too, so a snapshot
// refused for an identity already known leaves the entries (a recorded
// position's among them) as a reply not understood does;
// claimSnapshotLocked asks again once the endpoint is cleared, for an
// identity the receiver saw meanwhile.
func (st *stream) foreignSnapshotLocked(id [16]byte) error {
	if cur := st.lv.cur.Load(); cur != nil && *cur != id {
		st.p.snm.refused(st.id, snapRefusedPublisher)
		return fmt.Errorf("%w: snapshot publisher_id %s, live stream publisher_id %s", errForeignSnapshot,
			hex.EncodeToString(id[:]), hex.EncodeToString(cur[:]))
	}
	return nil
}

// decodedLocked notes what a batch about to be applied (live or replayed)
// tells: its publisher identity, shown in the status (a restart found by a
// replay is applied from replayed batches before any live message of the
// new lifetime), and the fields the index does not key on.
func (st *stream) decodedLocked(b *wire.Batch) {
	if b.HasPublisherID {
		if cur := st.lv.shownID.Load(); cur == nil || *cur != b.PublisherID {
			id := b.PublisherID
			st.lv.shownID.Store(&id)
		}
	}
	st.p.sm.lv.countUnindexed(st.id, b)
}

// identityRestartLocked starts a new publisher lifetime after a new
// identity: like a sequence going backwards (restartLocked), with its own
// log line.
func (st *stream) identityRestartLocked(prev, id [16]byte) {
	s := &st.s
	if s.closed {
		return
	}
	if st.liveReset.Swap(false) {
		return // a replay found this restart first (see restartLocked)
	}
	st.bumpGenLocked()
	removed := st.clearLocked()
	s.needJoin, s.restarted = true, true
	s.cooldownUntil = time.Time{}
	st.p.m.PublisherRestarts.WithLabelValues(st.id).Inc()
	st.log.Info("Publisher restarted: new publisher identity; endpoint cleared",
		"previous_publisher_id", hex.EncodeToString(prev[:]), "publisher_id", hex.EncodeToString(id[:]),
		"blocks_removed", removed)
}

// heard records a message of a watched publisher: it ends a silence and
// keeps the silence timer armed.
func (st *stream) heard() {
	lv := &st.lv
	lv.lastHeard.Store(st.p.clock.Now().UnixNano())
	if lv.silent.Load() {
		st.lock()
		if lv.silent.Swap(false) && !st.s.closed {
			st.log.Info("Publisher heard again after falling silent")
		}
		st.unlock()
	}
	if !lv.armed.Load() && lv.armed.CompareAndSwap(false, true) {
		st.lock()
		st.armSilenceLocked(st.p.cfg.PublisherSilence)
		st.unlock()
	}
}

// unwatch stops judging the publisher by its silence.
func (st *stream) unwatch() {
	st.lock()
	st.lv.watched.Store(false)
	st.lv.silent.Store(false)
	if st.lv.timer != nil && st.lv.timer.Stop() {
		st.lv.armed.Store(false)
	}
	st.unlock()
}

// armSilenceLocked (re)starts the silence timer.
func (st *stream) armSilenceLocked(d time.Duration) {
	if st.s.closed {
		st.lv.armed.Store(false)
		return
	}
	if st.lv.timer == nil {
		st.lv.timer = st.p.clock.AfterFunc(d, st.checkSilence)
		return
	}
	st.lv.timer.Reset(d)
}

// checkSilence runs when the silence timer fires: a publisher heard within
// PublisherSilence re-arms it for the rest of the interval; one that was
// not is marked silent (the endpoint degraded) until heard again.
func (st *stream) checkSilence() {
	lv := &st.lv
	limit := st.p.cfg.PublisherSilence
	st.lock()
	defer st.unlock()
	if st.s.closed || !lv.watched.Load() {
		lv.armed.Store(false)
		return
	}
	quiet := st.p.clock.Now().Sub(time.Unix(0, lv.lastHeard.Load()))
	if quiet < limit {
		st.armSilenceLocked(limit - quiet)
		return
	}
	lv.armed.Store(false)
	lv.silent.Store(true)
	// A message that arrived meanwhile (its heard saw silent false and
	// armed true) would leave the endpoint degraded until the next one:
	// look again after publishing silent, as heard does the other way round.
	if st.p.clock.Now().Sub(time.Unix(0, lv.lastHeard.Load())) < limit {
		lv.silent.Store(false)
		if lv.armed.CompareAndSwap(false, true) {
			st.armSilenceLocked(limit)
		}
		return
	}
	st.p.sm.lv.HeartbeatTimeouts.WithLabelValues(st.id).Inc()
	st.log.Warn("Publisher fell silent: no heartbeat or event; endpoint degraded until it is heard again",
		"silent_for", quiet, "limit", limit)
}

// stopLivenessLocked stops the silence timer (the stream closes).
func (st *stream) stopLivenessLocked() {
	if st.lv.timer != nil {
		st.lv.timer.Stop()
	}
}

// silentLocked reports whether a watched publisher fell silent.
func (st *stream) silentLocked() bool { return st.lv.silent.Load() }

// publisherStatus fills the identity and heartbeat part of an
// EndpointStatus.
func (st *stream) publisherStatus(es *EndpointStatus) {
	if id := st.lv.shownID.Load(); id != nil {
		es.PublisherID, es.HasPublisherID = *id, true
	}
	es.Heartbeats = st.lv.watched.Load()
	es.Silent = st.lv.silent.Load()
	if n := st.lv.lastHeard.Load(); n != 0 {
		es.LastHeard = time.Unix(0, n)
	}
}
