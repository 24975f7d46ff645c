package kvevents

import (
	"context"
	"errors"

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

// replayRun is one replay's state, shared by its steps: the plan, and
// what the batches delivered so far showed. The steps run on the stream's
// worker goroutine (the replay goroutine only fetches).
type replayRun struct {
	st     *stream
	ctx    context.Context
	cancel context.CancelCauseFunc
	gen    uint64
	plan   replayPlan
	// known is plan.known, or the wire watermark once a waiting rebuild
	// attaches.
	known uint64
	// first: no batch has been delivered yet; covered: no sequence was
	// found missing.
	first, covered bool
	// fresh counts the batches applied, delivered those handed over.
	fresh, delivered int
}

// runReplay fetches the batches from plan.from on and applies them; see
// the stream doc comment for the rules.
func (st *stream) runReplay(ctx context.Context, cancel context.CancelCauseFunc, gen uint64, plan replayPlan) {
	defer st.wg.Done()
	defer cancel(nil)
	r := &replayRun{st: st, ctx: ctx, cancel: cancel, gen: gen, plan: plan, known: plan.known, first: true, covered: true}
	res, err := st.rc.ReplayBatches(ctx, st.replayAddr, plan.from, func(rb replay.Batch) error {
		var verdict error
		if !st.onWorker(ctx, func(dec *wire.Decoder, b *wire.Batch) { verdict = r.apply(rb, dec, b) }) {
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
	st.onWorker(st.ctx, func(dec *wire.Decoder, b *wire.Batch) { r.finish(res, err, cause, dec, b) })
}

// apply handles one replayed batch on the worker goroutine; a non-nil
// error ends the replay.
func (r *replayRun) apply(rb replay.Batch, dec *wire.Decoder, b *wire.Batch) error {
	st := r.st
	st.lock()
	defer st.unlock()
	s := &st.s
	if s.closed || s.gen != r.gen {
		return errSuperseded
	}
	if s.rebuilding {
		// The rebuild holds a replay slot and its first batch is here:
		// from now on live messages wait for it, as for any replay.
		r.known = st.lastSeen.Load()
		st.attachRebuildLocked(r.ctx, r.cancel, r.gen, r.known)
	}
	r.delivered++
	if st.liveConn.Load() && rb.Seq > st.replayLimit(r.plan.from) {
		// Never ahead of the live stream by more than the slack,
		// however fast the replay streams (see PoolConfig.ReplayLookahead).
		return errOutOfRange
	}
	if r.first {
		r.first = false
		if done, err := r.firstLocked(rb.Seq, rb.Payload); done {
			return err
		}
	}
	return r.applyBatchLocked(rb, dec, b)
}

// firstLocked checks the first batch against the plan: the batch at the
// watermark with its digest for a verifying replay, the batch at from for
// any other. It reports done when the batch needs nothing more (the
// watermark verified) or err ends the replay.
func (r *replayRun) firstLocked(seq uint64, payload []byte) (done bool, err error) {
	st, from := r.st, r.plan.from
	s := &st.s
	if !r.plan.verify {
		if seq != from {
			if st.snapshotMayReplaceLocked(r.plan) {
				return true, errUseSnapshot
			}
			r.covered = false
			st.lostRangeLocked(from, seq-1)
		}
		return false, nil
	}
	s.verifying = false
	switch {
	case seq == from && PayloadDigest(payload) == s.digest:
		st.resumedLocked()
		return true, nil // the same stream: continue after it
	case seq == from:
		return true, errRestarted
	case st.snapshotMayReplaceLocked(r.plan):
		return true, errUseSnapshot // the position left the buffer: the engine's snapshot is more complete
	case s.rs.pending:
		// A resumed stream whose position left the buffer:
		// keep or clear the loaded entries (resumeWindowLocked).
		if !st.resumeWindowLocked(from, seq) {
			r.covered = false
		}
	default:
		// The batch at the watermark is gone from the buffer:
		// what follows cannot be checked.
		r.covered = false
		st.lostRangeLocked(from, seq-1)
	}
	return false, nil
}

// applyBatchLocked applies a replayed batch past the watermark and the
// held live messages it now covers; errCaughtUp ends the replay once it
// covered every live message known.
func (r *replayRun) applyBatchLocked(rb replay.Batch, dec *wire.Decoder, b *wire.Batch) error {
	st, seq := r.st, rb.Seq
	s := &st.s
	model, guessed, unknown := st.replayModelLocked(rb.Topic)
	switch {
	case !s.has || seq == s.applied+1:
		r.fresh++
		st.applyLocked(seq, rb.Payload, model, dec, b)
		st.noteReplayModelLocked(guessed, unknown)
	case seq <= s.applied:
		// Already applied.
	default:
		// The client delivers contiguous sequences; be safe anyway.
		r.covered = false
		st.lostRangeLocked(s.applied+1, seq-1)
		r.fresh++
		st.applyLocked(seq, rb.Payload, model, dec, b)
		st.noteReplayModelLocked(guessed, unknown)
	}
	if st.drainCoveredLocked(dec, b) && s.applied >= r.known {
		return errCaughtUp
	}
	return nil
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
