package kvevents

import (
	"errors"

	"github.com/kvroute/kvroute/kvevents/snapshot"
	"github.com/kvroute/kvroute/kvevents/wire"
)

// Snapshot load outcomes: the result label of
// kvroute_kv_events_snapshot_loads_total.
const (
	snapLoaded = "loaded" // applied; the watermark is the snapshot's sequence
	snapFailed = "failed" // the client gave up or the reply was refused: replay instead
)

// snapRefusedSeq is the reason of kvroute_kv_events_snapshot_errors_total
// for a snapshot whose sequence does not fit the live stream's within
// ReplayLookahead.
const snapRefusedSeq = "seq_out_of_range"

// errSnapshotSeq refuses a snapshot whose sequence is out of the live
// stream's range.
var errSnapshotSeq = errors.New("kvevents: the snapshot's sequence is out of the live stream's range")

// resumeSnapshot is the resume outcome (kvroute_kv_events_resumes_total) of
// a recorded position the replay buffer no longer held, replaced by the
// engine's snapshot; counted once the snapshot is loaded (a load that
// fails after clearing the entries counts ResumeGapCleared).
const resumeSnapshot = "engine_snapshot"

// finishSnapshotLocked ends the load: on success the watermark is the
// snapshot's sequence and held messages follow; on failure the replay the
// trigger asked for runs instead.
func (st *stream) finishSnapshotLocked(plan replayPlan, r snapshot.Reply, err error, blocks, chunks int, dec *wire.Decoder, b *wire.Batch) {
	s := &st.s
	s.replaying, s.quietCheck, s.snapshotting, s.cancelReplay = false, false, false, nil
	st.inProgress.Set(0)
	took := st.p.clock.Now().Sub(s.replayStart)
	if err == nil && !st.snapshotSeqFitsLocked(r.Seq) {
		st.p.snm.refused(st.id, snapRefusedSeq)
		st.log.Warn("Engine snapshot's sequence out of the live stream's range; refused",
			"snapshot_seq", r.Seq, "seen_at_start", s.snapFloor, "last_seen", st.lastSeen.Load(),
			"lookahead", st.p.cfg.ReplayLookahead)
		err = errSnapshotSeq
	}
	if err != nil {
		st.lv.snapID.Store(nil) // nothing of it is kept
		s.snapCooldownUntil = st.p.clock.Now().Add(st.p.cfg.ReplayCooldown)
		st.p.snm.load(st.id, snapFailed)
		st.snapshotStalledLocked(err, took)
		st.log.Warn("Engine snapshot not loaded; replaying instead", "reason", plan.trigger, "snapshot", st.snapAddr,
			"took", took, "err", err)
		if plan.verify && s.rs.pending && s.has && s.applied == plan.from {
			// The check of a recorded position, whose entries the load
			// never touched: check it again without the snapshot, as a
			// resumed stream with no snapshot socket is checked.
			plan.noSnapshot, plan.known = true, max(plan.known, st.lastSeen.Load())
			st.startReplayLocked(plan)
			return
		}
		if s.rs.replaced {
			// The recorded entries were cleared for the snapshot and are
			// rebuilt from the replay window.
			st.p.rm.count(st.id, ResumeGapCleared)
		}
		if s.has || st.p.ix.EndpointBlocks(st.id) > 0 {
			st.clearLocked() // possibly half-applied: rebuild from the replay window
		}
		s.rs.replaced = false
		fallback := replayPlan{trigger: plan.trigger, known: max(plan.known, st.lastSeen.Load()), noSnapshot: true}
		if st.rc == nil {
			st.drainHeldLocked(dec, b) // no replay either: rebuild from the live stream
			return
		}
		st.startReplayLocked(fallback)
		return
	}
	st.p.snm.load(st.id, snapLoaded)
	if s.rs.replaced {
		s.rs.replaced = false
		st.p.rm.count(st.id, resumeSnapshot)
	}
	st.p.snm.bytes.Observe(float64(r.Bytes))
	s.needJoin, s.restarted, s.degraded, s.unconfirmed = false, false, false, false
	s.hasDigest = false // the batch at the snapshot's sequence was never seen
	if r.Seq >= 0 {
		s.applied, s.has = uint64(r.Seq), true
		// Nothing live on this connection bounded it: the first live
		// message checks it, as it checks a replay's watermark.
		s.unconfirmed = !st.liveConn.Load()
		s.unconfirmedSnap = s.unconfirmed
	}
	st.synced.Store(true)
	st.lastApply.Store(st.p.clock.Now().UnixNano())
	st.setSourceLocked(sourceSnapshot)
	st.log.Info("Engine snapshot loaded", "reason", plan.trigger, "snapshot_seq", r.Seq, "chunks", chunks,
		"bytes", r.Bytes, "blocks", blocks, "held", len(s.held), "took", took)
	st.drainHeldLocked(dec, b)
	if !s.replaying && s.catchUp {
		s.catchUp = false
		st.catchUpLocked()
	}
}

// snapshotSeqFitsLocked reports whether a snapshot at seq (SeqEmpty: -1)
// fits the live stream within ReplayLookahead: not behind the live
// sequence seen when the load started by more than the slack, and not
// ahead of the last one seen on this connection by more than it.
func (st *stream) snapshotSeqFitsLocked(seq int64) bool {
	la := st.p.cfg.ReplayLookahead
	next := uint64(seq + 1) // the first live sequence that follows it
	if st.s.hasSnapFloor && addSat(next, la) < st.s.snapFloor {
		return false
	}
	return seq < 0 || !st.liveConn.Load() || uint64(seq) <= addSat(st.lastSeen.Load(), la)
}
