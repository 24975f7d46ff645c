package kvevents

import (
	"errors"
	"time"

	"github.com/kvroute/kvroute/kvevents/wire"
	"github.com/kvroute/kvroute/replay"
)

// finish applies a replay's outcome on the worker goroutine: it reads the
// result, counts it, and starts what follows (held messages, a catch-up,
// a rebuild, the repair and probe timers). A restart or Remove that took
// over meanwhile leaves it nothing to do.
func (r *replayRun) finish(res replay.Result, err, cause error, dec *wire.Decoder, b *wire.Batch) {
	st := r.st
	st.lock()
	defer st.unlock()
	s := &st.s
	if s.closed || s.gen != r.gen {
		return // a restart or Remove took over
	}
	s.replaying, s.quietCheck, s.cancelReplay, s.verifying, s.rebuilding = false, false, nil, false, false
	st.inProgress.Set(0)
	if st.replayToSnapshotLocked(r.plan, err, r.plan.verify, r.delivered, r.plan.from, r.known) {
		return
	}
	if errors.Is(err, errRestarted) || (r.plan.verify && err == nil && r.delivered == 0) {
		// A different batch at the watermark, or none where the old
		// lifetime's must still be buffered: the engine restarted.
		r.restartedLocked()
		return
	}
	result, rebuildNow := r.resultLocked(res, err, cause)
	r.settleLocked(result)
	r.countLocked(res, result)
	r.nextLocked(result, rebuildNow, dec, b)
}

// restartedLocked ends a replay that found another publisher lifetime at
// the watermark: the endpoint is cleared and replayed from 0 in a new
// generation.
func (r *replayRun) restartedLocked() {
	st := r.st
	s := &st.s
	st.resumeRestartedLocked()
	st.bumpGenLocked()
	removed := st.clearLocked()
	s.cooldownUntil = time.Time{}
	st.liveReset.Store(true)
	st.forgetLiveIdentity()
	st.p.m.PublisherRestarts.WithLabelValues(st.id).Inc()
	st.log.Info("Publisher restarted while disconnected (no matching batch at the watermark); endpoint cleared",
		"seq", r.plan.from, "blocks_removed", removed)
	st.startReplayLocked(st.planReplayLocked(trigRestart, 0))
}

// resultLocked reads the replay's result (the result label of
// replays_total) and applies what a failure asks (a cooldown, a clear, a
// hole to repair). rebuildNow asks for a rebuild at once.
func (r *replayRun) resultLocked(res replay.Result, err, cause error) (result string, rebuildNow bool) {
	st := r.st
	s := &st.s
	from, known := r.plan.from, r.known
	switch {
	case errors.Is(err, errOutOfRange):
		r.outOfRangeLocked()
		return replayFailed, false
	case errors.Is(cause, errCutShort):
		return replayCutShort, r.cutShortLocked()
	case err != nil && r.plan.probe && res.Highest <= s.applied:
		// A check that could not be made: nothing is known to be missing,
		// so no cooldown; the attempts' errors are counted by operation.
		st.log.Info("Replay probe failed", "reason", r.plan.trigger, "from", from, "err", err)
		return replayFailed, false
	case err != nil:
		r.failedLocked(res, err)
		return replayFailed, false
	case !r.covered:
		return replayPartial, false
	case r.delivered == 0 && known > from:
		// Nothing from `from` on although `known` was published after it:
		// the range is gone. (known itself may not be buffered yet: vLLM
		// sends a batch before it buffers it.)
		st.lostRangeLocked(from, known-1)
		return replayPartial, false
	}
	return replayComplete, false
}

// outOfRangeLocked handles a reply beyond what the live stream has shown:
// a protocol error, a cooldown, and a clear when the replay ran ahead.
func (r *replayRun) outOfRangeLocked() {
	st, from := r.st, r.plan.from
	s := &st.s
	st.p.m.ZMQErrors.WithLabelValues(st.id, opReplayProtocol).Inc()
	s.cooldownUntil = st.p.clock.Now().Add(st.p.cfg.ReplayCooldown)
	if s.holeTo > st.replayLimit(from) {
		// The hole's end was told by a reply beyond the bound too:
		// no sequence is known to be missing up to it.
		s.holeTo = 0
	}
	removed := 0
	if last := st.lastSeen.Load(); s.has && s.applied > last {
		// The replay ran ahead of the live stream: what it applied there
		// cannot be trusted, and live messages up to it would be skipped.
		removed = st.clearLocked()
	}
	st.log.Warn("Replay rejected: a sequence beyond what the live stream has shown",
		"reason", r.plan.trigger, "from", from, "last_seen", st.lastSeen.Load(), "lookahead", st.p.cfg.ReplayLookahead,
		"blocks_removed", removed)
}

// cutShortLocked handles a replay too slow for the live messages waiting
// on it: a cooldown, and a clear where the gap stays open. It reports
// whether the lost history is rebuilt at once.
func (r *replayRun) cutShortLocked() (rebuildNow bool) {
	st, from := r.st, r.plan.from
	s := &st.s
	s.cooldownUntil = st.p.clock.Now().Add(st.p.cfg.ReplayCooldown)
	removed, lost := 0, false
	switch {
	case s.has && (len(s.held) == 0 || s.held[0].seq > s.applied+1):
		removed, lost = st.clearLocked(), true // the gap stays open: rebuild from the live stream
	case !s.has && len(s.held) > 0 && s.held[0].seq > from:
		lost = true // from..held[0]-1 were never applied
	}
	if lost {
		// What the live stream no longer shows is recovered by a
		// rebuild (replay_rebuild.go): at once when the replay
		// never got a batch (it waited for a slot), else after the
		// cooldown.
		s.lostHistory = true
		rebuildNow = r.delivered == 0
	}
	st.log.Warn("Replay too slow for the live stream: cut short, endpoint back to live",
		"reason", r.plan.trigger, "from", from, "batches", r.delivered, "waited", st.p.clock.Now().Sub(s.replayStart),
		"held", len(s.held), "blocks_removed", removed, "history_lost", lost)
	return rebuildNow
}

// failedLocked handles a replay the client gave up: a cooldown, and the
// hole left to repair.
func (r *replayRun) failedLocked(res replay.Result, err error) {
	st, from := r.st, r.plan.from
	s := &st.s
	var rerr *replay.Error
	if errors.As(err, &rerr) && rerr.Op == replay.OpNoProgress {
		st.p.m.ZMQErrors.WithLabelValues(st.id, rerr.Op).Inc()
	}
	s.cooldownUntil = st.p.clock.Now().Add(st.p.cfg.ReplayCooldown)
	// The highest sequence the replies carried, delivered or not, is
	// known to be published only within the bound the replay is held
	// to: a reply beyond it (one the client rejected as a hole before
	// it reached the bound check) leaves no hole to repair up to it.
	highest := res.Highest
	if st.liveConn.Load() && highest > st.replayLimit(from) {
		highest = 0
	}
	st.noteHoleLocked(max(r.known, highest))
	st.log.Warn("Replay failed", "reason", r.plan.trigger, "from", from, "batches", r.delivered,
		"applied_seq", s.appliedSeq(), "missing_to", s.holeTo, "holes", res.Holes,
		"cooldown", st.p.cfg.ReplayCooldown, "err", err)
}

// settleLocked records what a replay that ended left the stream with:
// synced (and its index source, a rebuild's history) unless it failed or
// was cut short, and a watermark no live message bounded.
func (r *replayRun) settleLocked(result string) {
	st := r.st
	s := &st.s
	if result != replayFailed && result != replayCutShort {
		st.synced.Store(true) // caught up, even on an empty buffer
		if r.plan.from == 0 && s.source == "" {
			st.setSourceLocked(sourceReplay)
		}
		if r.plan.trigger == trigRebuild {
			s.lostHistory = false // rebuilt, or the buffer held nothing to rebuild from
		}
	}
	if !st.liveConn.Load() && r.fresh > 0 {
		s.unconfirmed, s.unconfirmedSnap = true, false // nothing live to bound it: checked by the first live message
	}
}

// countLocked counts the replay: in probes_total when it was a probe that
// found nothing (or could not be made), else in replays_total.
func (r *replayRun) countLocked(res replay.Result, result string) {
	st, probe := r.st, r.plan.probe
	s := &st.s
	switch {
	case probe && result == replayFailed && r.fresh == 0:
		st.p.sm.Probes.WithLabelValues(st.id, probeFailed).Inc()
	case probe && r.fresh == 0 && result == replayComplete:
		// Nothing was missing: a probe, not a replay.
		st.p.sm.Probes.WithLabelValues(st.id, probeEmpty).Inc()
	default:
		if probe {
			st.p.sm.Probes.WithLabelValues(st.id, probeRepaired).Inc()
		}
		st.p.m.Replays.WithLabelValues(st.id, result).Inc()
		if result != replayFailed && result != replayCutShort {
			st.log.Info("Replay complete", "reason", r.plan.trigger, "from", r.plan.from, "batches", r.delivered,
				"result", result, "layout", res.Layout, "applied_seq", s.appliedSeq(), "messages_applied", s.messages)
		}
	}
}

// nextLocked starts what follows a replay: the held messages, a rekey
// replay, a catch-up, a rebuild, or the repair and probe timers.
func (r *replayRun) nextLocked(result string, rebuildNow bool, dec *wire.Decoder, b *wire.Batch) {
	st := r.st
	s := &st.s
	if s.rs.pending {
		// The check could not be made (failed, rejected or cut short): the
		// next live message is classified without a digest.
		s.rs.noVerify = true
	}
	if st.rekeyLocked() && len(s.held) == 0 {
		st.startReplayLocked(st.planReplayLocked(trigModel, 0))
	}
	st.drainHeldLocked(dec, b)
	if !s.replaying && s.catchUp {
		s.catchUp = false
		st.catchUpLocked()
	}
	switch {
	case s.replaying:
	case rebuildNow:
		st.startRebuildLocked()
	default:
		st.armRepairLocked()
		if r.plan.trigger == trigConnect && result == replayComplete && r.delivered == 0 && !s.has {
			// One join probe: the subscription is set up while this
			// replay runs, and a PUB socket drops what it sends before
			// it has the SUBSCRIBE (ZeroMQ's slow joiner), so a batch
			// published meanwhile is in neither this answer nor the
			// live stream; on an engine that then idles nothing else
			// would reveal it (the tail probe needs a watermark). It
			// asks from 0 a TailProbeDelay later on the tail probe's
			// timer; live traffic meanwhile re-arms that timer as a
			// tail probe, and one that finds nothing is not repeated.
			st.armProbeLocked()
		}
	}
}
