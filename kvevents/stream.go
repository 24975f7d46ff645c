package kvevents

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvroute/kvroute/kvevents/snapshot"
	"github.com/kvroute/kvroute/replay"
	"github.com/kvroute/kvroute/telemetry"
)

// stream applies one endpoint's KV-event messages to the index in sequence
// order. It is the only place that knows what the index holds for the
// endpoint, and its state machine (phases and transitions in
// stream_phase.go, drawn in the package doc; replays planned from their
// trigger in replay_plan.go) keeps one invariant:
//
//	the endpoint's index entries are exactly the effect of a contiguous run
//	of batches base..applied of the publisher's current stream, or there are
//	none (no watermark).
//
// An index built from a suffix of the stream is incomplete but correct:
// every entry is a block the engine stored and did not remove since. Stale
// entries only come from a gap (a missed BlockRemoved) or from an older
// publisher lifetime, so every gap is either filled by replay or the entries
// are dropped and rebuilt from a new base ("empty but correct beats stale").
// The one exception is an endpoint without a replay address: its gaps are
// counted (kvroute_kv_events_sequence_gaps_total), logged and the endpoint
// is marked degraded, because clearing a warm endpoint on every lost message
// would cost more than the rare stale block.
//
// Everything that changes what a stream has applied runs on its worker's
// goroutine (stream.sequenced): the receiver hands restarts and catch-up
// requests over, the subscription its connects, the pool clock's timers
// their tail probes and repairs, Pool.Resync its rebuild, and the replay
// goroutine its batches and outcome. The lock (mu) remains for readers
// (Status, Position, the replay's watchdog), and every locked section ends
// in the one transition function (stream.unlock). The goroutines:
//
//   - the receiver (the endpoint's supervisor, or the bind-mode loop) sees
//     messages in wire order. It keeps the wire watermark lastLive and
//     detects, before anything is queued: a duplicate (seq == lastLive:
//     dropped, reason "stale_seq") and a publisher restart (seq < lastLive:
//     vLLM restarts at 0 and has no epoch). A restart bumps the stream's
//     generation, clears the endpoint's entries, discards held messages
//     (counted, reason "superseded"), cancels a running replay and resets
//     the cooldown
//     (kvroute_kv_events_publisher_restarts_total). Every message is then
//     stamped with the generation and offered to the endpoint's worker
//     queue; a full queue drops it (reason "queue_full") and requests a
//     catch-up replay.
//   - the worker applies queued messages under mu; messages of an older
//     generation are discarded (counted, reason "superseded"), as are
//     those of a stream a new one replaced (a new address or model),
//     counted when it is replaced (close).
//   - at most one replay goroutine per generation fetches missed batches
//     and hands each one, and at the end its outcome, to the worker
//     (stream.onWorker), which applies them under mu: replayed and live
//     batches are sequenced on the same goroutine. While it runs (replaying), live messages
//     it has not yet covered are held in arrival order (those it has are
//     applied at once, and held ones as soon as it reaches them) (at most HoldSize messages and HoldBytes of
//     payload; beyond that dropped, reason "hold_full", and a catch-up
//     replay follows the replay).
//
// Per live message, with no replay running (sequenceLocked):
//
//	no watermark, replay address, join pending, not cooling down
//	            → hold it and replay from 0 ("Requesting proactive replay on
//	              connect"; after a restart, reason "restart")
//	no watermark otherwise → apply it: it becomes the base
//	seq <= applied         → skip (already applied, e.g. by a replay)
//	seq == applied+1       → apply
//	seq >  applied+1 (gap) → counted, then
//	    no replay address  → log, mark degraded, apply
//	    cooling down       → clear the endpoint, apply it as the new base
//	                         (also while a rebuild waits for a replay slot)
//	    otherwise          → hold it and replay from applied+1
//
// A replay from s applies each batch that extends the watermark. When its
// first batch is later than s, the publisher's buffer no longer holds the
// gap: the endpoint is cleared and rebuilt from the replay window. A replay
// that returns nothing although a later sequence was seen means the same.
// Outcomes are counted in kvroute_kv_events_replays_total: "complete",
// "partial" (rebuilt from the window) or "failed" (the replay client gave
// up; a cooldown of ReplayCooldown starts, during which gaps clear the
// endpoint instead of replaying). A failed replay that knew of sequences
// beyond the watermark (its replies, or the live message that revealed the
// gap) leaves a hole: the endpoint is degraded until a repair replay, one
// per ReplayCooldown, fills it (replay_repair.go). When the replay ends, held messages go
// through the rules above in order (the overlap is skipped by the watermark
// test, a remaining gap starts the next replay), then a pending catch-up
// replays from applied+1 if the wire watermark is ahead.
//
// Decode failures advance the watermark (a replay would return the same
// bytes) and are counted as decode errors.
//
// Restarts the receiver cannot see: vLLM's sequence has no epoch, so a
// publisher that restarted while the subscriber was disconnected and is
// already past the old watermark looks like a continuation. Every reconnect
// therefore replays from the watermark itself and compares the batch at
// that sequence with the digest of the payload applied there (Position): a
// different payload, or no batch at all where one must be buffered, is a
// restart (counted, the endpoint cleared and rebuilt from 0). A check that
// finds nothing new counts only as a probe.
//
// Replayed sequences are bounded by what the live stream has shown:
// PoolConfig.ReplayLookahead (a small slack) beyond its last sequence,
// whatever the replay's pace. A replay beyond it is a protocol error: it
// ends, and if it had already moved the watermark past the live stream the
// endpoint is cleared, so no live message is skipped as already applied.
// Before any live message on the current connection (a connect or
// reconnect replay of an idle engine) nothing bounds the replay, and the
// first live message checks the replayed watermark instead.
// Live messages at or below the watermark are counted (reason
// "already_applied"), never skipped silently.
type stream struct {
	p          *Pool
	id         string
	cfgModel   string   // the endpoint's configured model ("" = from topics)
	cfgModels  []string // further served models its topics may name (Endpoint.Models); set at creation, then read-only
	replayAddr string
	rc         *replay.Client   // nil: no replay address
	snapAddr   string           // the engine's snapshot socket (stream_snapshot.go)
	sc         *snapshot.Client // nil: no snapshot address
	w          *worker
	log        *slog.Logger
	ctx        context.Context // ends when the stream closes; parent of replays
	cancel     context.CancelFunc
	wg         sync.WaitGroup // replay goroutines

	received       prometheus.Counter
	queueFull      prometheus.Counter
	gaps           prometheus.Counter
	alreadyApplied prometheus.Counter
	inProgress     prometheus.Gauge

	liveReset atomic.Bool            // a replay found a restart: the receiver forgets lastLive
	liveModel atomic.Pointer[string] // model of the last live message received (set by the receiver)
	liveConn  atomic.Bool            // a live message arrived on the current connection: replays are bounded by lastSeen
	probeT    telemetry.Timer        // tail probe, on the pool clock; guarded by mu
	repairT   telemetry.Timer        // repair of a hole a replay left (replay_repair.go); guarded by mu

	// Receiver-only state.
	lastLive uint64
	hasLive  bool

	gen       atomic.Uint64 // mirror of s.gen, read by the receiver to stamp messages
	closed    atomic.Bool
	inQueue   atomic.Int64  // live messages queued on the worker and not taken by handle while open (close counts a replaced stream's)
	recvMu    sync.RWMutex  // held for reading while the receiver handles a message (whileOpen); close waits for it
	lastSeen  atomic.Uint64 // mirror of lastLive for Status and catch-up replays
	seen      atomic.Bool
	connected atomic.Bool
	recycling atomic.Bool  // the subscription of a quiet engine is down only while its socket is recreated (stream_phase.go)
	lastApply atomic.Int64 // unix nanos of the last applied batch (0: none)
	synced    atomic.Bool  // a batch was applied or a replay completed: the index caught up once

	lv liveness // publisher identity and heartbeats (stream_liveness.go)

	mu sync.Mutex
	s  seqState
	et eventTraceState // see tracing.go
}

// seqState is the part of a stream guarded by stream.mu.
type seqState struct {
	gen       uint64
	closed    bool
	has       bool   // a watermark exists
	applied   uint64 // index watermark: last sequence applied
	model     string // model of the last applied live message (for replays)
	needJoin  bool   // the next message without watermark triggers a replay from 0
	restarted bool   // that replay follows a publisher restart

	replaying    bool
	quietCheck   bool // the running replay is a quiet check (replayPlan.quiet): readiness keeps the state it had (stateLocked)
	cancelReplay context.CancelFunc
	held         []item
	heldBytes    int
	catchUp      bool // a message was dropped: catch up by replay once the current replay ends

	cooldownUntil time.Time
	degraded      bool
	holeTo        uint64 // a replay gave up on applied+1..holeTo, published but not applied (replay_repair.go)
	lostHistory   bool   // the endpoint was rebuilt from the live stream after a cut-short replay: a rebuild from 0 is due (replay_rebuild.go)
	rebuilding    bool   // that rebuild waits for a replay slot; live messages flow meanwhile
	messages      uint64 // messages applied (live and replayed)

	digest          uint64 // PayloadDigest of the batch at applied
	hasDigest       bool
	unconfirmed     bool // the watermark comes from a replay no live message has checked yet
	unconfirmedSnap bool // that watermark is the engine snapshot's sequence
	probeArmed      bool // traffic since the last tail probe
	replayStart     time.Time
	verifying       bool   // the running replay checks the digest at applied first
	heldMax         uint64 // highest held sequence during this replay

	// Replayed batches were applied under the pool's default model because
	// nothing named the endpoint's model (replay_model.go); the first live
	// message checks it.
	modelGuessed bool
	sinceClear   uint64 // batches applied since the endpoint was last cleared
	modelWrong   bool   // a live message named another model: clear and replay under it

	rs resumeState // started from a recorded position (stream_resume.go)

	// The snapshot phase (stream_snapshot.go).
	snapshotting      bool      // the running "replay" is a snapshot load
	snapCooldownUntil time.Time // no snapshot load replaces a replay before this
	snapFloor         uint64    // the live sequence seen when the load started (hasSnapFloor: on this connection)
	hasSnapFloor      bool
	source            string // what the entries were last rebuilt from (EndpointStatus.IndexSource)

	// Recorded by transitionLocked (stream_phase.go).
	phase      phase
	phaseSince time.Time
	state      StreamState
	stateSince time.Time
}

// appliedSeq is the watermark for a log line: the last sequence applied, or
// "none" before the first. (A replay of the engine's first batch ends at
// sequence 0, which a log must not read as "nothing applied".)
func (s *seqState) appliedSeq() any {
	if !s.has {
		return "none"
	}
	return s.applied
}

// item is one live message on its way to a worker.
type item struct {
	st      *stream
	gen     uint64
	seq     uint64
	model   string
	payload []byte
	tr      *eventSpan // sampled for tracing (see tracing.go); nil for most messages
}

// size is the bytes an item holds that the queue and hold bounds count: its
// payload, and the model name its topic carried when that is not the
// endpoint's configured model. Such a name is a string of its own, parsed
// at each change of topic and as long as the topic frame allows: a
// publisher alternating between two long topics made each queued message
// hold a copy the bounds did not see.
func (it *item) size() int {
	if it.st != nil && it.model == it.st.cfgModel {
		return len(it.payload)
	}
	return len(it.payload) + len(it.model)
}

func newStream(p *Pool, id, model, replayAddr string) *stream {
	ctx, cancel := context.WithCancel(p.ctx)
	st := &stream{
		p: p, id: id, cfgModel: model, replayAddr: replayAddr,
		log: p.log.With("endpoint", id), ctx: ctx, cancel: cancel,
		received:       p.m.MessagesReceived.WithLabelValues(id),
		queueFull:      p.m.Dropped.WithLabelValues(id, string(dropQueueFull)),
		gaps:           p.m.SequenceGaps.WithLabelValues(id),
		alreadyApplied: p.m.Dropped.WithLabelValues(id, string(dropAlreadyApplied)),
		inProgress:     p.sm.ReplayInProgress.WithLabelValues(id),
	}
	st.s.model = model
	st.s.needJoin = true
	if replayAddr != "" {
		st.rc = p.replayClient(id)
	}
	if pos, ok := p.resume[id]; ok {
		delete(p.resume, id)
		st.s.rs.ensured, st.s.rs.hasEnsured = pos, true // adopted by adoptPositionLocked
	}
	// Last: the first readiness state is computed from what the stream
	// has now (its replay client included), not from a half-built one.
	st.startPhaseLocked(p.clock.Now())
	return st
}

// close stops the stream: nothing is applied after it returns. With clear,
// the endpoint's entries are removed from the index. replaced: the
// endpoint stays in the pool under a new stream (a new address, replay
// address or model), so the live messages this one still holds or has
// queued are dropped inputs of the endpoint, counted as superseded like
// those of a new generation, all of them before close returns (so none is
// counted after a later Remove deleted the endpoint's series); and a
// recorded position whose check has not ended is counted as superseded,
// since the entries it restored are cleared. Otherwise the endpoint
// leaves the pool, or the pool closes, with everything in flight, and
// nothing is counted.
func (st *stream) close(clear, replaced bool) {
	st.lock()
	replaced = replaced && !st.s.closed
	if replaced {
		st.supersedeLocked()
	}
	st.s.closed = true
	st.closed.Store(true)
	st.bumpGenLocked()
	if st.probeT != nil {
		st.probeT.Stop()
	}
	if st.repairT != nil {
		st.repairT.Stop()
	}
	st.stopLivenessLocked()
	st.unlock()
	// Wait for the receiver's message in hand (whileOpen holds recvMu for
	// reading while it handles one); every later message sees closed.
	st.recvMu.Lock()
	//lint:ignore SA2001 the empty critical section is that barrier
	st.recvMu.Unlock()
	if replaced {
		// Nothing is queued after the barrier, and handle takes nothing
		// from a closed stream: what is still queued, or was taken by the
		// worker since closed was set, is final.
		st.p.m.drop(st.id, dropSuperseded, int(st.inQueue.Load()))
	}
	st.cancel()
	st.wg.Wait()
	if clear {
		pl := st.p.ix.LockPosition(st.id)
		st.p.ix.Clear(st.id)
		pl.Clear()
		pl.Unlock()
		st.p.ix.ForgetPosition(st.id)
		st.p.applier.forget(st.id)
	}
}

// status snapshots the stream for Pool.Status.
func (st *stream) status() EndpointStatus {
	st.lock()
	defer st.unlock()
	es := EndpointStatus{
		ID:         st.id,
		Connected:  st.connected.Load(),
		Received:   st.seen.Load(),
		LastSeq:    st.lastSeen.Load(),
		HasApplied: st.s.has,
		Applied:    st.s.applied,
		Replaying:  st.s.replaying,
		Degraded:   st.s.degraded || st.incompleteLocked() || st.silentLocked(),
		Messages:   st.s.messages,
		Replay:     st.replayAddr,
		Position:   Position{Seq: st.s.applied, Digest: st.s.digest},
		HasDigest:  st.s.hasDigest,
		ReplayingSince: func() time.Time {
			if st.s.replaying {
				return st.s.replayStart
			}
			return time.Time{}
		}(),
		Snapshot:    st.snapAddr,
		IndexSource: st.indexSourceLocked(),
		State:       st.s.state,
		Since:       st.s.stateSince,
		Phase:       string(st.s.phase),
		PhaseSince:  st.s.phaseSince,
		LastApplied: st.lastApplied(),
	}
	st.publisherStatus(&es)
	return es
}
