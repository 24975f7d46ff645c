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
// fetch failed leaves the restored entries as they were: the position is
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

// Snapshot load outcomes: the result label of
// kvroute_kv_events_snapshot_loads_total.
const (
	snapLoaded = "loaded" // applied; the watermark is the snapshot's sequence
	snapFailed = "failed" // the client gave up or the reply was refused: replay instead
)

// snapRefusedPublisher is the reason of kvroute_kv_events_snapshot_errors_total
// for a snapshot whose publisher identity is not the live stream's.
const snapRefusedPublisher = "publisher_mismatch"

// snapRefusedSeq is the reason of kvroute_kv_events_snapshot_errors_total
// for a snapshot whose sequence does not fit the live stream's within
// ReplayLookahead.
const snapRefusedSeq = "seq_out_of_range"

// errSnapshotSeq refuses a snapshot whose sequence is out of the live
// stream's range.
var errSnapshotSeq = errors.New("kvevents: the snapshot's sequence is out of the live stream's range")

// errForeignSnapshot refuses a snapshot of another publisher lifetime than
// the live stream's.
var errForeignSnapshot = errors.New("kvevents: the snapshot's publisher is not the live stream's")

// Index sources: what an endpoint's entries were last rebuilt from (the
// source label of kvroute_kv_events_index_source_total, EndpointStatus.IndexSource).
const (
	sourceLive     = "live"            // the live stream alone (no replay, no snapshot)
	sourceReplay   = "replay"          // the engine's replay buffer, then live
	sourceSnapshot = "engine_snapshot" // the engine's snapshot, then live
	sourceResumed  = "recorded"        // a checkpoint file or peer, verified by replay, then live
)

// resumeSnapshot is the resume outcome (kvroute_kv_events_resumes_total) of
// a recorded position the replay buffer no longer held, replaced by the
// engine's snapshot; counted once the snapshot is loaded (a load that
// fails after clearing the entries counts ResumeGapCleared).
const resumeSnapshot = "engine_snapshot"

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
	fetched := make(chan struct{})
	st.wg.Add(2)
	go st.runSnapshot(ctx, cancel, s.gen, plan, fetched)
	go st.watchSnapshot(ctx, cancel, s.gen, plan, fetched)
}

// runSnapshot fetches the snapshot and hands it, chunk by chunk, and then
// its outcome to the stream's worker.
func (st *stream) runSnapshot(ctx context.Context, cancel context.CancelCauseFunc, gen uint64, plan replayPlan, fetched chan<- struct{}) {
	defer st.wg.Done()
	defer cancel(nil)
	r, err := st.sc.Fetch(ctx, st.snapAddr)
	close(fetched) // the watchdog's part is over
	blocks, chunks := 0, len(r.Chunks)
	if err == nil {
		err = st.applySnapshot(ctx, gen, &r, &blocks)
	}
	if err != nil && errors.Is(context.Cause(ctx), errSnapshotStalled) {
		err = fmt.Errorf("%w: %w", errSnapshotStalled, err)
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

// applySnapshot clears the endpoint and applies r's chunks on the worker,
// releasing each one; the worker keeps sequencing other endpoints between
// chunks.
func (st *stream) applySnapshot(ctx context.Context, gen uint64, r *snapshot.Reply, blocks *int) error {
	var verdict error
	step := func(f func(dec *wire.Decoder, b *wire.Batch) error) error {
		if !st.onWorker(ctx, func(dec *wire.Decoder, b *wire.Batch) {
			st.lock()
			defer st.unlock()
			if st.s.closed || st.s.gen != gen {
				verdict = errSuperseded
				return
			}
			verdict = f(dec, b)
		}) {
			return errSuperseded
		}
		return verdict
	}
	if err := step(func(*wire.Decoder, *wire.Batch) error {
		resume := st.s.rs.pending // the recorded entries are given up for the snapshot
		removed := st.clearLocked()
		st.s.rs.replaced = resume
		st.log.Debug("Endpoint cleared for the engine's snapshot", "blocks_removed", removed)
		return st.claimSnapshotLocked(r.PublisherID)
	}); err != nil {
		return err
	}
	pos := Position{Seq: uint64(max(r.Seq, 0))}
	var refs snapshotRefs // the program's reference counts (snapshot_refs.go)
	for i := range r.Chunks {
		err := step(func(dec *wire.Decoder, b *wire.Batch) error {
			if err := dec.Decode(r.Chunks[i], b); err != nil {
				st.p.snm.refused(st.id, "chunk_decode")
				return err
			}
			model := st.snapshotChunkModelLocked(r.ChunkTopics, i)
			saltHashes(b, st.hashSalt(model)) // before the reference counts: each model's hashes apart
			refs.filter(b)
			res := st.p.applier.applyAt(st.id, model, b, pos)
			*blocks += res.StoredBlocks
			return nil
		})
		r.Chunks[i] = nil // applied: its memory can go
		if err != nil {
			return err
		}
	}
	return nil
}

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

// setSourceLocked records what the endpoint's entries were rebuilt from
// and counts the choice.
func (st *stream) setSourceLocked(src string) {
	if st.s.source == src {
		return
	}
	st.s.source = src
	st.p.snm.source(st.id, src)
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

// indexSourceLocked is EndpointStatus.IndexSource.
func (st *stream) indexSourceLocked() string {
	switch {
	case st.s.source != "":
		return st.s.source
	case st.s.has:
		return sourceLive
	}
	return ""
}

// snapshotChunkModelLocked is the model chunk i of a snapshot reply is
// applied under: the stream's model, or with kvroute's several-models
// extension the model its topic frame names (modelFor's rule, as for a
// live message of that topic; a model the endpoint does not serve is
// counted in kvroute_kv_events_topic_model_unknown_total).
func (st *stream) snapshotChunkModelLocked(topics [][]byte, i int) string {
	if i >= len(topics) || topics[i] == nil {
		return st.s.model
	}
	_, tm, _ := wire.ParseTopic(topics[i])
	m, unknown := st.modelFor(tm)
	if unknown && st.p.m != nil {
		st.p.m.TopicModelUnknown.WithLabelValues(st.id).Inc()
	}
	if m == "" {
		return st.s.model
	}
	return m
}
