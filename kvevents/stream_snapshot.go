package kvevents

import (
	"context"
	"errors"
	"fmt"

	"github.com/kvroute/kvroute/kvevents/snapshot"
	"github.com/kvroute/kvroute/kvevents/wire"
	"github.com/kvroute/kvroute/telemetry"
)

// The stream's snapshot phase: an endpoint with a snapshot address
// (Endpoint.SnapshotAddress, PoolConfig.Snapshot) loads the engine's whole
// cache from its vLLM snapshot socket where a replay could only rebuild
// the replay window:
//
//   - joining mid-stream (no watermark: the connect replay from 0),
//   - after a publisher restart (the restart replay from 0),
//   - when a replay's first batch is later than asked for, or a replay
//     returns nothing although later sequences exist: the buffer no longer
//     holds the gap (the replay is abandoned for the snapshot), including
//     the check of a recorded position (checkpoint, peer) that left the
//     buffer: the engine's snapshot is more complete than the loaded
//     entries plus the window.
//
// While it loads, the stream is in phase snapshot (replaying, for
// readiness): live messages are held as for a replay. The reply (sequence
// S, publisher identity, chunks) is applied chunk by chunk on the stream's
// worker, each chunk released once applied, after the endpoint is
// cleared; the watermark becomes S and held messages after S apply on top
// (a gap behind S is replayed from S+1 as usual). A load that fails (the
// overall deadline passes while the engine answers "unavailable", the
// reply is not understood, a chunk does not decode) falls back to the
// replay the trigger asked for, which never turns into a load itself, and
// no load replaces a replay for ReplayCooldown, so a broken snapshot socket
// cannot make the stream loop between loads and replays. The check of a recorded position whose
// fetch failed (or whose reply was refused as another publisher
// lifetime's) leaves the restored entries as they were: the position is
// checked again by a replay that never turns into a load, and ends as the
// check of a resumed stream without snapshot socket does (resumed,
// resumed_with_gap or gap_cleared, restarted); only a load that failed
// after clearing them rebuilds from sequence 0. A load is bounded as a replay is: while live
// messages wait for it, its reply must arrive within the replay's
// allowance for the same range (ReplayGrace plus one second per
// ReplayMinRate batches), or it is abandoned and counted
// (snapshot_errors_total{reason="stalled"}) and falls back the same way
// (stream_snapshot_watch.go).
//
// The reply's publisher identity must be the live stream's: a snapshot of
// another publisher lifetime (the engine restarted after the live
// messages seen, or the snapshot socket is another engine's) is refused
// like a reply not understood (snapshot_errors_total{reason=
// "publisher_mismatch"}), since its sequence says nothing of the live
// stream's. A snapshot loaded before the live stream showed any identity
// holds its publisher's entries: a live stream that then shows another
// identity restarts the endpoint, as a new identity does
// (stream_liveness.go).

// snapRefusedPublisher is the reason of kvroute_kv_events_snapshot_errors_total
// for a snapshot whose publisher identity is not the live stream's.
const snapRefusedPublisher = "publisher_mismatch"

// errForeignSnapshot refuses a snapshot of another publisher lifetime than
// the live stream's.
var errForeignSnapshot = errors.New("kvevents: the snapshot's publisher is not the live stream's")

// errUseSnapshot abandons a replay whose buffer no longer holds the range:
// a snapshot load takes over.
var errUseSnapshot = errors.New("kvevents: replay buffer lost the range; loading the engine's snapshot")

// newEndpointStreamLocked creates ep's stream with its snapshot client.
func (p *Pool) newEndpointStreamLocked(ep Endpoint) *stream {
	st := p.newStreamLocked(ep.ID, ep.Model, ep.ReplayAddress)
	st.cfgModels = ep.Models
	if ep.SnapshotAddress != "" {
		st.snapAddr, st.sc = ep.SnapshotAddress, p.snapshotClient(ep.ID)
	}
	return st
}

// snapshotClient returns a snapshot client that counts failed attempts of
// the endpoint by operation.
func (p *Pool) snapshotClient(id string) *snapshot.Client {
	cc := p.cfg.Snapshot.Client
	next := cc.OnAttemptError
	cc.OnAttemptError = func(e *snapshot.Error) {
		p.snm.attemptError(id, e)
		if next != nil {
			next(e)
		}
	}
	c, err := snapshot.NewClient(cc, snapshot.Options{Set: telemetry.Set{Logger: p.log, Clock: p.clock}})
	if err != nil {
		p.log.Error("Snapshot client unavailable", "endpoint", id, "err", err)
		return nil
	}
	return c
}

// snapshotReadyLocked reports whether a snapshot load may replace a replay
// now.
func (st *stream) snapshotReadyLocked() bool {
	cd := st.s.snapCooldownUntil
	return st.sc != nil && (cd.IsZero() || !st.p.clock.Now().Before(cd))
}

// snapshotMayReplaceLocked reports whether a running replay of plan that
// finds its range gone from the buffer may turn into a snapshot load: not
// a failed load's fallback, whatever the time since the failure (a
// fallback that waited out ReplayCooldown for its replay slot must not
// loop back to the load it stands in for).
func (st *stream) snapshotMayReplaceLocked(plan replayPlan) bool {
	return !plan.noSnapshot && st.snapshotReadyLocked()
}

// snapshotInsteadLocked reports whether plan's replay is replaced by a
// snapshot load: a replay from 0 on joining or after a restart.
func (st *stream) snapshotInsteadLocked(plan replayPlan) bool {
	return !plan.noSnapshot && plan.from == 0 &&
		(plan.trigger == trigConnect || plan.trigger == trigRestart) && st.snapshotReadyLocked()
}

// startSnapshotLocked starts loading the engine's snapshot in place of
// plan's replay (its fallback).
func (st *stream) startSnapshotLocked(plan replayPlan) {
	s := &st.s
	ctx, cancel := context.WithCancelCause(st.ctx)
	s.replaying, s.quietCheck, s.snapshotting, s.catchUp = true, false, true, false
	s.cancelReplay = func() { cancel(errSuperseded) }
	s.verifying = false
	s.replayStart, s.heldMax = st.p.clock.Now(), 0
	// The live sequence the snapshot must reach (less the slack): one of
	// this connection and publisher lifetime (a restart a replay found
	// leaves the receiver's to be forgotten).
	s.snapFloor, s.hasSnapFloor = st.lastSeen.Load(), st.liveConn.Load() && !st.liveReset.Load()
	st.inProgress.Set(1)
	st.log.Info("Loading the engine's KV-cache snapshot", "reason", plan.trigger, "snapshot", st.snapAddr,
		"applied_seq", s.appliedSeq())
	f := newSnapFetch()
	st.wg.Add(2)
	go st.runSnapshot(ctx, cancel, s.gen, plan, f)
	go st.watchSnapshot(ctx, cancel, s.gen, plan, f)
}

// runSnapshot fetches the snapshot and hands it, chunk by chunk, and then
// its outcome to the stream's worker.
func (st *stream) runSnapshot(ctx context.Context, cancel context.CancelCauseFunc, gen uint64, plan replayPlan, f *snapFetch) {
	defer st.wg.Done()
	defer cancel(nil)
	r, err := st.sc.Fetch(ctx, st.snapAddr)
	if !f.arrived() { // the watchdog gave the load up first
		if err == nil {
			err = errSnapshotStalled
		} else {
			err = fmt.Errorf("%w: %w", errSnapshotStalled, err)
		}
	}
	blocks, chunks := 0, len(r.Chunks)
	if err == nil {
		err = st.applySnapshot(ctx, gen, &r, &blocks)
	}
	st.onWorker(st.ctx, func(dec *wire.Decoder, b *wire.Batch) {
		st.lock()
		defer st.unlock()
		if st.s.closed || st.s.gen != gen {
			return // a restart or Remove took over
		}
		st.finishSnapshotLocked(plan, r, err, blocks, chunks, dec, b)
	})
}

// replayToSnapshotLocked ends a replay that found its range gone from the
// engine's buffer by loading the snapshot instead; it reports whether it
// did. Messages held for the replay stay held for the load.
func (st *stream) replayToSnapshotLocked(plan replayPlan, err error, verify bool, delivered int, from, known uint64) bool {
	gone := err == nil && !verify && delivered == 0 && known > from && st.snapshotMayReplaceLocked(plan)
	if !errors.Is(err, errUseSnapshot) && !gone {
		return false
	}
	// A recorded position's outcome waits for the load: engine_snapshot
	// once it is loaded, the position checked again if the fetch fails
	// (finishSnapshotLocked).
	st.p.m.Replays.WithLabelValues(st.id, replaySnapshot).Inc()
	st.log.Info("Replay buffer no longer holds the range; loading the engine's snapshot instead",
		"reason", plan.trigger, "from", from, "known", known, "batches", delivered)
	st.startSnapshotLocked(plan)
	return true
}
