package kvevents

import (
	"github.com/kvroute/kvroute/kvevents/wire"
)

// bumpGenLocked starts a new generation: queued and held messages and the
// running replay of the previous one are discarded, and a resume whose
// check has not ended is counted as superseded. The held ones are
// counted here (reason "superseded"), the queued ones when the worker
// reaches them (handle); on close neither is here: close counts them
// itself when a new stream replaces the endpoint's, and else the endpoint
// leaves the pool, or the pool closes, with everything in flight.
func (st *stream) bumpGenLocked() {
	s := &st.s
	if !s.closed {
		st.supersedeLocked()
	}
	s.gen++
	st.gen.Store(s.gen)
	if s.cancelReplay != nil {
		s.cancelReplay()
		s.cancelReplay = nil
	}
	s.replaying, s.quietCheck, s.catchUp, s.verifying, s.rebuilding = false, false, false, false, false
	s.snapshotting = false
	s.held, s.heldBytes, s.heldMax = nil, 0, 0
	st.inProgress.Set(0)
}

// supersedeLocked counts what a new generation (bumpGenLocked) or a new
// stream replacing this one (close) throws away: the held live messages,
// as superseded drops, and a recorded position whose check has not ended,
// since the endpoint is cleared (supersedeResumeLocked).
func (st *stream) supersedeLocked() {
	st.p.m.drop(st.id, dropSuperseded, len(st.s.held))
	st.supersedeResumeLocked()
}

// supersedeResumeLocked counts, once, as superseded a recorded position
// whose check (or the snapshot load that replaced its entries) has not
// ended: a new generation (bumpGenLocked), or a new stream replacing this
// one (close), clears the endpoint before the check could confirm or
// refute the position (clearLocked then forgets it, or close does).
func (st *stream) supersedeResumeLocked() {
	rs := &st.s.rs
	if rs.pending || rs.replaced {
		rs.pending, rs.replaced = false, false
		st.p.rm.count(st.id, resumeSuperseded)
	}
}

// clearLocked drops the endpoint's entries and its watermark. A recorded
// position whose check has not ended is counted here, once, as
// gap_cleared: its entries are gone and the endpoint is rebuilt from what
// follows (a replay cut short, a replay rejected as running ahead of the
// live stream). The resume rules, bumpGenLocked, close (of a replaced
// stream) and the snapshot load count their own outcome and end the check
// before they clear.
func (st *stream) clearLocked() int {
	if st.s.rs.pending {
		st.s.rs.pending = false
		st.p.rm.count(st.id, ResumeGapCleared)
	}
	pl := st.p.ix.LockPosition(st.id)
	removed := st.p.ix.Clear(st.id)
	pl.Clear()
	pl.Unlock()
	st.p.applier.forget(st.id)
	st.lv.snapID.Store(nil) // no snapshot's entries are left
	st.s.has, st.s.degraded, st.s.hasDigest, st.s.unconfirmed = false, false, false, false
	st.s.holeTo = 0
	st.s.lostHistory = st.s.lostHistory && st.s.rebuilding // a waiting rebuild still recovers it
	st.s.modelGuessed, st.s.modelWrong = false, false
	st.s.sinceClear = 0
	st.s.source = ""
	st.s.rs = resumeState{adopted: true}
	return removed
}

// catchUpLocked replays from the watermark when the wire is ahead of it.
func (st *stream) catchUpLocked() {
	s := &st.s
	if st.rc == nil || st.coolingLocked() {
		return
	}
	if !s.has {
		s.needJoin = true // the next message replays from 0
		return
	}
	if last := st.lastSeen.Load(); st.seen.Load() && last > s.applied {
		st.log.Info("Resynchronising after dropped messages", "from", s.applied+1, "last_seen", last)
		st.startReplayLocked(st.planReplayLocked(trigCatchUp, last))
	}
}

// coolingLocked reports whether no replay may start now: after a failed
// replay, for ReplayCooldown, and while a rebuild waits for a replay slot.
func (st *stream) coolingLocked() bool {
	return st.s.rebuilding || (!st.s.cooldownUntil.IsZero() && st.p.clock.Now().Before(st.s.cooldownUntil))
}

// handle is the worker's entry point.
func (st *stream) handle(it item, dec *wire.Decoder, b *wire.Batch) {
	st.lock()
	defer st.unlock()
	if st.s.closed {
		return // a replaced stream's were counted by close
	}
	st.inQueue.Add(-1)
	if it.gen != st.s.gen {
		st.p.m.drop(st.id, dropSuperseded, 1) // queued before a new generation began
		return
	}
	if it.tr != nil {
		st.beginProcessLocked(it.tr)
		defer st.endProcessLocked()
	}
	st.adoptPositionLocked()
	if st.s.replaying {
		// Covered by the replay already: apply (or count) it now rather
		// than waiting for the replay to end.
		if st.s.has && !st.s.snapshotting && len(st.s.held) == 0 && !st.s.unconfirmed && !st.s.verifying && it.seq <= st.s.applied+1 {
			st.sequenceLocked(it, dec, b)
			return
		}
		st.holdLocked(it)
		return
	}
	st.sequenceLocked(it, dec, b)
}

// sequenceLocked applies the per-message rules of the state machine.
func (st *stream) sequenceLocked(it item, dec *wire.Decoder, b *wire.Batch) {
	s := &st.s
	if it.model != "" {
		s.model = it.model // replays apply with the model of the live stream
	}
	st.checkGuessedModelLocked(it.model)
	if s.unconfirmed && s.has && addSat(it.seq, st.p.cfg.ReplayLookahead) < s.applied {
		// The watermark came from a replay (or the engine's snapshot) before
		// any live message, and the live stream is far behind it: the
		// replay's sequences (the snapshot's) were bogus.
		// No pending resume here: the watermark came from a replay that
		// applied batches, whose first one decided a pending position
		// (planReplayLocked), or from a snapshot that replaced it.
		if s.unconfirmedSnap {
			st.p.snm.refused(st.id, snapRefusedSeq)
		} else {
			st.p.m.ZMQErrors.WithLabelValues(st.id, opReplayProtocol).Inc()
		}
		removed := st.clearLocked()
		st.log.Warn("Replayed sequences far ahead of the live stream: endpoint cleared, rebuilding from the live stream",
			"replayed_up_to", s.applied, "live_seq", it.seq, "blocks_removed", removed)
		s.needJoin = false
	}
	if s.rs.pending && st.resumeLiveLocked(it, dec, b) {
		return
	}
	s.unconfirmed = false
	switch {
	case !s.has:
		if (st.rc != nil || st.snapshotReadyLocked()) && s.needJoin && !st.coolingLocked() {
			s.needJoin = false
			trig, msg := trigConnect, "Requesting proactive replay on connect"
			if s.restarted {
				trig, msg = trigRestart, "Requesting replay from 0 after publisher restart"
			}
			s.restarted = false
			st.log.Info(msg, "seq", it.seq, "replay", st.replayAddr)
			st.startReplayLocked(st.planReplayLocked(trig, it.seq))
			st.holdLocked(it)
			return
		}
		st.applyLocked(it.seq, it.payload, it.model, dec, b)
	case it.seq <= s.applied:
		// Already applied (by a replay, or a duplicate).
		st.alreadyApplied.Inc()
	case it.seq == s.applied+1:
		st.applyLocked(it.seq, it.payload, it.model, dec, b)
	default:
		st.gaps.Inc()
		from := s.applied + 1
		switch {
		case st.rc == nil:
			s.degraded = true
			st.log.Warn("Sequence gap without replay address: events lost, index may be stale",
				"from", from, "to", it.seq-1)
			st.applyLocked(it.seq, it.payload, it.model, dec, b)
		case st.coolingLocked():
			// No pending resume here: resumeLiveLocked decided it above
			// (it classifies by sequence during a cooldown).
			removed := st.clearLocked()
			st.log.Warn("Sequence gap during replay cooldown: endpoint cleared, rebuilding from the live stream",
				"from", from, "to", it.seq-1, "blocks_removed", removed)
			st.applyLocked(it.seq, it.payload, it.model, dec, b)
		default:
			st.log.Info("Sequence gap: requesting replay", "from", from, "seq", it.seq)
			st.startReplayLocked(st.planReplayLocked(trigGap, it.seq))
			st.holdLocked(it)
		}
	}
}

// holdLocked keeps a live message until the running replay ends.
func (st *stream) holdLocked(it item) {
	if len(st.s.held) >= st.p.cfg.HoldSize || st.s.heldBytes+it.size() > st.p.cfg.HoldBytes {
		st.p.m.drop(st.id, dropHoldFull, 1)
		st.s.catchUp = true
		return
	}
	st.s.heldMax = max(st.s.heldMax, it.seq)
	st.s.held = append(st.s.held, it)
	st.s.heldBytes += it.size()
}

// applyLocked decodes a batch, applies it and advances the watermark.
func (st *stream) applyLocked(seq uint64, payload []byte, model string, dec *wire.Decoder, b *wire.Batch) {
	s := &st.s
	if model == "" {
		model = s.model
	}
	tr := st.tracingLocked(seq)
	tr.startDecode()
	err := dec.Decode(payload, b)
	tr.endDecode(err, b)
	if err != nil {
		// Dropped and counted; the watermark moves past it (no gap), but
		// the index, and so the position it records with the group kinds,
		// holds nothing of it: a stream resumed from that position replays
		// it again.
		st.p.m.ZMQErrors.WithLabelValues(st.id, "decode").Inc()
		st.p.m.drop(st.id, dropDecodeError, 1)
	} else {
		st.decodedLocked(b)
		saltHashes(b, st.hashSalt(model))
		r := st.p.applier.applyAt(st.id, model, b, positionOf(seq, payload))
		tr.applied(r)
		st.p.storedBlocks.Add(uint64(r.StoredBlocks))
	}
	s.applied, s.has = seq, true
	s.digest, s.hasDigest = PayloadDigest(payload), true
	st.lastApply.Store(st.p.clock.Now().UnixNano())
	st.synced.Store(true)
	s.messages++
	s.sinceClear++
	st.p.applied.Add(1)
	st.armProbeLocked()
}
