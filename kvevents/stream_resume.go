package kvevents

import "github.com/kvroute/kvroute/kvevents/wire"

// resumeState is the part of seqState for a stream started from a recorded
// position. It adds no check of its own: a resumed stream is verified by
// the reconnect check every stream runs (replay from the watermark itself,
// compare the digest; replay_run.go). What it adds is where the
// watermark comes from, the outcome counter, and what to do when the
// replay buffer no longer reaches the position.
//
// The position is adopted once, when the stream first connects or handles
// a message (adoptPositionLocked) — not when it is created: a stream that
// replaces another for the same endpoint (Ensure with a new address) is
// created before the old one is stopped and cleared, and must not adopt
// the old stream's position. It is the one given to Pool.EnsureFrom, or
// else the one the index records for the endpoint (every applied batch
// records it, Applier.applyAt; a loaded checkpoint or a peer's snapshot
// restores it). The first check then decides:
//
//	same sequence, same digest → the same publisher lifetime: what follows
//	                             is applied, nothing twice ("resumed")
//	same sequence, other digest, or nothing at all
//	                           → the engine restarted: the endpoint is
//	                             cleared and rebuilt from 0 ("restarted")
//	the next sequence          → the position itself left the buffer but
//	                             nothing after it did: continue
//	                             ("unverified")
//	a later sequence           → the buffer no longer covers the
//	                             position: keep the entries and continue
//	                             from the window ("resumed_with_gap"), or
//	                             with PoolConfig.ClearOnResumeGap clear and
//	                             rebuild from the window ("gap_cleared")
//
// Keeping the entries on a gap is the default because of what the two
// errors cost: an entry whose BlockRemoved fell into the gap costs one
// cache miss on the request routed by it (and is corrected when the engine
// evicts or re-stores the block); clearing loses every prefix the engine
// cached before the replay window — vLLM announces a block only when it
// computes it, never on a cache hit, so those prefixes stay out of the
// index until evicted and recomputed.
//
// Without a replay address, while replays are cooling down, or after the
// check failed, there is no digest to compare: the first live message at
// the next sequence is accepted ("unverified"), one at or below the
// position means a restart, and a later one is a gap as above. A replay
// from after the position that starts meanwhile (a catch-up after a
// dropped message, a repair) asks from the position instead and is the
// check (planReplayLocked). A publisher restart or a Resync that clears
// the endpoint before any of these is decided counts the resume as
// "superseded" (bumpGenLocked), as does a new events address, replay
// address or model that replaces the stream (close).
type resumeState struct {
	adopted    bool     // the position was looked up (once, before anything else)
	pending    bool     // the adopted position is not verified yet
	noVerify   bool     // the digest check could not be made: classify by sequence
	replaced   bool     // the pending position's entries were cleared for an engine snapshot now loading
	ensured    Position // given to Pool.EnsureFrom
	hasEnsured bool
}

// adoptPositionLocked starts the stream from its recorded position, if any.
func (st *stream) adoptPositionLocked() {
	rs := &st.s.rs
	if rs.adopted {
		return
	}
	rs.adopted = true
	if st.s.has {
		return
	}
	var (
		pos    Position
		groups map[int]string
		found  bool
	)
	if raw, ok := st.p.ix.Position(st.id); ok {
		p, g, err := parsePosition(raw)
		switch {
		case err != nil && !rs.hasEnsured:
			st.log.Warn("Recorded stream position unreadable; endpoint cleared and rebuilt", "err", err)
			st.clearLocked()
			return
		case err == nil && (!rs.hasEnsured || p == rs.ensured):
			pos, groups, found = p, g, true
		}
	}
	if rs.hasEnsured {
		pos, found = rs.ensured, true
	}
	if !found {
		return
	}
	s := &st.s
	s.has, s.applied, s.digest, s.hasDigest, s.needJoin = true, pos.Seq, pos.Digest, true, false
	s.rs = resumeState{adopted: true, pending: true}
	st.p.applier.restoreGroups(st.id, groups)
	st.log.Info("Resuming from recorded stream position", "applied_seq", pos.Seq)
}

// resumedLocked counts a resumed stream whose digest matched.
func (st *stream) resumedLocked() {
	if st.s.rs.pending {
		st.s.rs.pending = false
		st.p.rm.count(st.id, ResumeOK)
		st.setSourceLocked(sourceResumed)
		st.log.Info("Resumed from recorded stream position", "applied_seq", st.s.appliedSeq())
	}
}

// resumeRestartedLocked counts a resumed stream whose check found a
// restarted engine (the caller clears the endpoint and replays from 0).
func (st *stream) resumeRestartedLocked() {
	if st.s.rs.pending {
		st.s.rs.pending = false
		st.p.rm.count(st.id, ResumeRestarted)
	}
}

// resumeWindowLocked handles the first batch of a resumed stream's check
// when it is not the batch at the position (from) but seq, later: the
// buffer no longer holds the position. It reports whether nothing was lost
// (seq is the next batch). On a gap the entries are kept and the watermark
// moves to seq-1, so seq applies on top of them, or with ClearOnResumeGap
// the endpoint is cleared and seq becomes the new base.
func (st *stream) resumeWindowLocked(from, seq uint64) bool {
	s := &st.s
	s.rs.pending = false
	if seq == from+1 {
		st.p.rm.count(st.id, ResumeUnverified)
		return true
	}
	st.gaps.Inc()
	if st.resumeGapLocked(from+1, seq-1) {
		s.applied = seq - 1 // the gap is accepted
	}
	return false
}

// resumeLiveLocked handles a live message that arrives while the position
// is unverified and no check runs. It reports whether it took care of the
// message.
func (st *stream) resumeLiveLocked(it item, dec *wire.Decoder, b *wire.Batch) bool {
	s := &st.s
	if st.rc != nil && !st.coolingLocked() && !s.rs.noVerify {
		st.startReplayLocked(st.planReplayLocked(trigReconnect, it.seq)) // the digest check
		st.holdLocked(it)
		return true
	}
	s.rs.pending = false
	switch {
	case it.seq == s.applied+1:
		st.p.rm.count(st.id, ResumeUnverified)
	case it.seq <= s.applied:
		st.p.rm.count(st.id, ResumeRestarted)
		st.p.m.PublisherRestarts.WithLabelValues(st.id).Inc()
		position := s.applied
		removed := st.clearLocked()
		s.needJoin, s.restarted = true, true // with a replay address: replay from 0
		st.log.Warn("Live sequence at or below the recorded position: engine restarted; endpoint cleared",
			"position", position, "seq", it.seq, "blocks_removed", removed)
	default:
		st.gaps.Inc()
		if st.resumeGapLocked(s.applied+1, it.seq-1) {
			st.applyLocked(it.seq, it.payload, it.model, dec, b)
			return true
		}
	}
	return false
}

// resumeGapLocked handles a recorded position the stream can no longer
// reach (sequences from..to are lost). It reports whether the entries were
// kept (the caller applies the next batch on top of them).
func (st *stream) resumeGapLocked(from, to uint64) bool {
	if st.p.cfg.ClearOnResumeGap {
		st.p.rm.count(st.id, ResumeGapCleared)
		removed := st.clearLocked()
		st.log.Warn("Replay buffer no longer covers the recorded position: endpoint cleared (clearOnResumeGap)",
			"from", from, "to", to, "blocks_removed", removed)
		return false
	}
	st.p.rm.count(st.id, ResumeWithGap)
	st.log.Warn("Replay buffer no longer covers the recorded position: keeping the loaded entries",
		"from", from, "to", to)
	return true
}

// position is Pool.Position for this stream.
func (st *stream) position() (Position, bool) {
	st.lock()
	defer st.unlock()
	s := &st.s
	switch {
	case s.has && s.hasDigest:
		return Position{Seq: s.applied, Digest: s.digest}, true
	case s.rs.adopted || s.has:
		return Position{}, false
	case s.rs.hasEnsured:
		return s.rs.ensured, true
	}
	if raw, ok := st.p.ix.Position(st.id); ok {
		if pos, _, err := parsePosition(raw); err == nil {
			return pos, true
		}
	}
	return Position{}, false
}
