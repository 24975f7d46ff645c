package kvevents

import (
	"context"
	"errors"
	"time"

	"github.com/kvroute/kvroute/kvevents/wire"
	"github.com/kvroute/kvroute/replay"
)

// Replay outcomes: the result label of kvroute_kv_events_replays_total.
const (
	replayComplete = "complete"  // the gap was filled
	replayPartial  = "partial"   // the buffer no longer held the gap: rebuilt from the replay window
	replayFailed   = "failed"    // the replay client gave up, or the reply broke the sequence rules
	replayCutShort = "cut_short" // too slow for the live messages waiting on it: endpoint back to live
	replaySnapshot = "snapshot"  // the buffer no longer held the range: the engine's snapshot was loaded instead
)

// opReplayProtocol is the zmq_errors_total operation of a replay reply that
// breaks the sequence rules (a sequence beyond what the stream could show).
const opReplayProtocol = "replay-protocol"

var (
	// errSuperseded aborts a replay whose stream was restarted or closed.
	errSuperseded = errors.New("kvevents: replay superseded")
	// errCaughtUp ends a replay once it has covered every live message:
	// the live stream takes over.
	errCaughtUp = errors.New("kvevents: replay caught up with the live stream")
	// errRestarted ends a reconnect check whose batch at the watermark is
	// not the one applied: the engine restarted.
	errRestarted = errors.New("kvevents: publisher restarted (digest mismatch at the watermark)")
	// errOutOfRange ends a replay that delivered an implausible sequence.
	errOutOfRange = errors.New("kvevents: replayed sequence beyond what the live stream could show")
	// errCutShort is the cancellation cause of a replay that fell behind.
	errCutShort = errors.New("kvevents: replay too slow for the live stream")
)

// startReplayLocked starts the stream's replay goroutine as planned by
// planReplayLocked.
func (st *stream) startReplayLocked(plan replayPlan) {
	if st.snapshotInsteadLocked(plan) {
		st.startSnapshotLocked(plan)
		return
	}
	s := &st.s
	ctx, cancel := context.WithCancelCause(st.ctx)
	verify, from, known := plan.verify, plan.from, plan.known
	s.replaying, s.catchUp, s.cancelReplay = true, false, func() { cancel(errSuperseded) }
	s.quietCheck = plan.quiet
	s.verifying = verify
	s.replayStart, s.heldMax = st.p.clock.Now(), 0
	st.inProgress.Set(1)
	st.wg.Add(2)
	go st.runReplay(ctx, cancel, s.gen, plan)
	go st.watchReplay(ctx, cancel, s.gen, from, known)
}

// runReplay fetches the batches from `from` on and applies them; see the
// stream doc comment for the rules.
func (st *stream) runReplay(ctx context.Context, cancel context.CancelCauseFunc, gen uint64, plan replayPlan) {
	defer st.wg.Done()
	from, known, verify, reason := plan.from, plan.known, plan.verify, plan.trigger
	defer cancel(nil)
	first, covered, fresh, delivered := true, true, 0, 0
	// applyBatch runs on the stream's worker goroutine: the replay
	// goroutine only fetches and hands each batch over (onWorker).
	applyBatch := func(rb replay.Batch, dec *wire.Decoder, b *wire.Batch) error {
		st.lock()
		defer st.unlock()
		s := &st.s
		if s.closed || s.gen != gen {
			return errSuperseded
		}
		if s.rebuilding {
			// The rebuild holds a replay slot and its first batch is here:
			// from now on live messages wait for it, as for any replay.
			known = st.lastSeen.Load()
			st.attachRebuildLocked(ctx, cancel, gen, known)
		}
		seq := rb.Seq
		delivered++
		if st.liveConn.Load() && seq > st.replayLimit(from) {
			// Never ahead of the live stream by more than the slack,
			// however fast the replay streams (see PoolConfig.ReplayLookahead).
			return errOutOfRange
		}
		if first {
			first = false
			if verify {
				s.verifying = false
				switch {
				case seq == from && PayloadDigest(rb.Payload) == s.digest:
					st.resumedLocked()
					return nil // the same stream: continue after it
				case seq == from:
					return errRestarted
				case st.snapshotMayReplaceLocked(plan):
					return errUseSnapshot // the position left the buffer: the engine's snapshot is more complete
				case s.rs.pending:
					// A resumed stream whose position left the buffer:
					// keep or clear the loaded entries (resumeWindowLocked).
					if !st.resumeWindowLocked(from, seq) {
						covered = false
					}
				default:
					// The batch at the watermark is gone from the buffer:
					// what follows cannot be checked.
					covered = false
					st.lostRangeLocked(from, seq-1)
				}
			} else if seq != from {
				if st.snapshotMayReplaceLocked(plan) {
					return errUseSnapshot
				}
				covered = false
				st.lostRangeLocked(from, seq-1)
			}
		}
		model, guessed, unknown := st.replayModelLocked(rb.Topic)
		switch {
		case !s.has || seq == s.applied+1:
			fresh++
			st.applyLocked(seq, rb.Payload, model, dec, b)
			st.noteReplayModelLocked(guessed, unknown)
		case seq <= s.applied:
			// Already applied.
		default:
			// The client delivers contiguous sequences; be safe anyway.
			covered = false
			st.lostRangeLocked(s.applied+1, seq-1)
			fresh++
			st.applyLocked(seq, rb.Payload, model, dec, b)
			st.noteReplayModelLocked(guessed, unknown)
		}
		if st.drainCoveredLocked(dec, b) && s.applied >= known {
			return errCaughtUp
		}
		return nil
	}
	res, err := st.rc.ReplayBatches(ctx, st.replayAddr, from, func(rb replay.Batch) error {
		var verdict error
		if !st.onWorker(ctx, func(dec *wire.Decoder, b *wire.Batch) { verdict = applyBatch(rb, dec, b) }) {
			return errSuperseded
		}
		return verdict
	})
	if errors.Is(err, errCaughtUp) {
		err = nil
	}
	cause := context.Cause(ctx)
	// The outcome is applied on the worker goroutine too; a closing stream
	// (its context ended) takes none.
	st.onWorker(st.ctx, func(dec *wire.Decoder, b *wire.Batch) {
		st.lock()
		defer st.unlock()
		s := &st.s
		if s.closed || s.gen != gen {
			return // a restart or Remove took over
		}
		s.replaying, s.quietCheck, s.cancelReplay, s.verifying, s.rebuilding = false, false, nil, false, false
		st.inProgress.Set(0)
		if st.replayToSnapshotLocked(plan, err, verify, delivered, from, known) {
			return
		}
		probe := plan.probe
		// The highest sequence the replies carried, delivered or not, is
		// known to be published only within the bound the replay is held
		// to: a reply beyond it (one the client rejected as a hole before
		// it reached the bound check) leaves no hole to repair up to it.
		highest := res.Highest
		if st.liveConn.Load() && highest > st.replayLimit(from) {
			highest = 0
		}
		result := replayComplete
		rebuildNow := false
		switch {
		case errors.Is(err, errRestarted) || (verify && err == nil && delivered == 0):
			// A different batch at the watermark, or none where the old
			// lifetime's must still be buffered: the engine restarted.
			st.resumeRestartedLocked()
			st.bumpGenLocked()
			removed := st.clearLocked()
			s.cooldownUntil = time.Time{}
			st.liveReset.Store(true)
			st.forgetLiveIdentity()
			st.p.m.PublisherRestarts.WithLabelValues(st.id).Inc()
			st.log.Info("Publisher restarted while disconnected (no matching batch at the watermark); endpoint cleared",
				"seq", from, "blocks_removed", removed)
			st.startReplayLocked(st.planReplayLocked(trigRestart, 0))
			return
		case errors.Is(err, errOutOfRange):
			result = replayFailed
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
				"reason", reason, "from", from, "last_seen", st.lastSeen.Load(), "lookahead", st.p.cfg.ReplayLookahead,
				"blocks_removed", removed)
		case errors.Is(cause, errCutShort):
			result = replayCutShort
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
				rebuildNow = delivered == 0
			}
			st.log.Warn("Replay too slow for the live stream: cut short, endpoint back to live",
				"reason", reason, "from", from, "batches", delivered, "waited", st.p.clock.Now().Sub(s.replayStart),
				"held", len(s.held), "blocks_removed", removed, "history_lost", lost)
		case err != nil && probe && res.Highest <= s.applied:
			// A check that could not be made: nothing is known to be missing,
			// so no cooldown; the attempts' errors are counted by operation.
			result = replayFailed
			st.log.Info("Replay probe failed", "reason", reason, "from", from, "err", err)
		case err != nil:
			result = replayFailed
			var rerr *replay.Error
			if errors.As(err, &rerr) && rerr.Op == replay.OpNoProgress {
				st.p.m.ZMQErrors.WithLabelValues(st.id, rerr.Op).Inc()
			}
			s.cooldownUntil = st.p.clock.Now().Add(st.p.cfg.ReplayCooldown)
			st.noteHoleLocked(max(known, highest))
			st.log.Warn("Replay failed", "reason", reason, "from", from, "batches", delivered,
				"applied_seq", s.appliedSeq(), "missing_to", s.holeTo, "holes", res.Holes,
				"cooldown", st.p.cfg.ReplayCooldown, "err", err)
		case !covered:
			result = replayPartial
		case delivered == 0 && known > from:
			// Nothing from `from` on although `known` was published after it:
			// the range is gone. (known itself may not be buffered yet: vLLM
			// sends a batch before it buffers it.)
			result = replayPartial
			st.lostRangeLocked(from, known-1)
		}
		if result != replayFailed && result != replayCutShort {
			st.synced.Store(true) // caught up, even on an empty buffer
			if from == 0 && s.source == "" {
				st.setSourceLocked(sourceReplay)
			}
			if reason == trigRebuild {
				s.lostHistory = false // rebuilt, or the buffer held nothing to rebuild from
			}
		}
		if !st.liveConn.Load() && fresh > 0 {
			s.unconfirmed, s.unconfirmedSnap = true, false // nothing live to bound it: checked by the first live message
		}
		switch {
		case probe && result == replayFailed && fresh == 0:
			st.p.sm.Probes.WithLabelValues(st.id, probeFailed).Inc()
		case probe && fresh == 0 && result == replayComplete:
			// Nothing was missing: a probe, not a replay.
			st.p.sm.Probes.WithLabelValues(st.id, probeEmpty).Inc()
		default:
			if probe {
				st.p.sm.Probes.WithLabelValues(st.id, probeRepaired).Inc()
			}
			st.p.m.Replays.WithLabelValues(st.id, result).Inc()
			if result != replayFailed && result != replayCutShort {
				st.log.Info("Replay complete", "reason", reason, "from", from, "batches", delivered,
					"result", result, "layout", res.Layout, "applied_seq", s.appliedSeq(), "messages_applied", s.messages)
			}
		}
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
			if reason == trigConnect && result == replayComplete && delivered == 0 && !s.has {
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
	})
}

// lostRangeLocked handles sequences from..to that no replay can provide:
// entries built before them may be stale, so the endpoint is cleared and
// rebuilt from what follows.
func (st *stream) lostRangeLocked(from, to uint64) {
	if !st.s.has {
		st.log.Info("Replay buffer starts after the requested sequence; indexing from the replay window",
			"from", from, "to", to)
		return
	}
	removed := st.clearLocked()
	st.log.Warn("Replay cannot fill the gap: endpoint cleared, rebuilding from the replay window",
		"from", from, "to", to, "blocks_removed", removed)
}
