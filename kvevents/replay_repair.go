package kvevents

// A replay either ends exact or says it did not. When the replay client
// gives up on sequences it knows were published — the publisher's replay
// socket kept dropping replies past its send high-water mark, or stopped
// answering midway — and no live message moved the stream past them, the
// endpoint holds a contiguous run up to applied while sequences
// applied+1..holeTo exist: a BlockRemoved among them would leave a stale
// block. Such an endpoint is degraded (EndpointStatus.Degraded, state
// "degraded", never "live"), and a repair replay from applied+1 is tried
// once per ReplayCooldown until the hole is filled (or the endpoint is
// cleared: a restart, or a gap that rebuilds it from the live stream). The
// replay client itself already asked again from the first missing sequence
// up to replay.ClientConfig.MaxHoleRetries times; the repair timer paces
// what follows, so an endpoint whose engine stays idle is still repaired.
// A repair is held to PoolConfig.ReplayLookahead like any replay: the end of
// the hole (a sequence the failed replay's replies carried) does not widen
// that bound. A reply beyond it leaves no hole when the live stream bounds
// the failed replay, and a hole recorded before any live message that ends
// beyond it is forgotten once a replay's answer is rejected as out of range.

// noteHoleLocked records, after a replay that failed, that sequences up to
// highest were published but not applied.
func (st *stream) noteHoleLocked(highest uint64) {
	s := &st.s
	if s.has && highest > s.applied {
		s.holeTo = max(s.holeTo, highest)
	}
}

// incompleteLocked reports whether the index is known to lack batches the
// publisher may still hold: after the watermark (a hole no replay filled),
// or before the base (lost history a rebuild is due to recover).
func (st *stream) incompleteLocked() bool {
	s := &st.s
	return (s.has && s.holeTo > s.applied) || s.lostHistory
}

// armRepairLocked schedules a repair of an incomplete endpoint one
// ReplayCooldown from now.
func (st *stream) armRepairLocked() {
	if st.rc == nil || st.s.closed || !st.incompleteLocked() {
		return
	}
	d := st.p.cfg.ReplayCooldown
	if st.repairT == nil {
		st.repairT = st.p.clock.AfterFunc(d, st.repair)
		return
	}
	st.repairT.Reset(d)
}

// repair replays from the watermark of an endpoint with a hole. A replay
// already running re-arms the repair when it ends, if still needed.
func (st *stream) repair() { st.sequenced(st.repairLocked) }

func (st *stream) repairLocked() {
	s := &st.s
	if s.closed || s.replaying || s.rebuilding || !st.incompleteLocked() {
		return
	}
	if s.lostHistory {
		st.startRebuildLocked()
		return
	}
	st.log.Info("Repairing a replay that ended with sequences missing", "from", s.applied+1, "to", s.holeTo)
	st.startReplayLocked(st.planReplayLocked(trigRepair, 0))
}
