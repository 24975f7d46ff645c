package kvevents

import (
	"sync/atomic"
	"time"
)

// phase is where an endpoint's stream stands in its state machine (the
// package doc draws it). Two conditions run across the phases: cooling down
// (coolingLocked: no replay may start, after a failed replay or while a
// rebuild waits for its slot) and degraded (the index may lack or hold
// stale batches: a gap without replay, a hole a replay left, lost history).
type phase string

// The phases.
const (
	// phaseConnecting: no watermark; waiting for the subscription, the
	// first message or the connect replay.
	phaseConnecting phase = "connecting"
	// phaseResuming: the watermark is a recorded position (checkpoint, peer
	// snapshot, EnsureFrom) not verified yet (stream_resume.go).
	phaseResuming phase = "resuming"
	// phaseLive: a watermark; live messages are sequenced as they come.
	phaseLive phase = "live"
	// phaseReplaying: a replay runs; the live messages it has not covered
	// are held until it does.
	phaseReplaying phase = "replaying"
	// phaseSnapshot: the engine's snapshot is being loaded in place of a
	// replay (stream_snapshot.go); live messages are held as for a replay.
	phaseSnapshot phase = "snapshot"
	// phaseClosed: the stream was removed or the pool closed; nothing is
	// applied any more.
	phaseClosed phase = "closed"
)

// transitions is the state machine: the phases each phase may move to. The
// package doc's diagram lists exactly these (TestPhaseDiagramIsTheTable).
var transitions = map[phase][]phase{
	phaseConnecting: {phaseResuming, phaseReplaying, phaseSnapshot, phaseLive, phaseClosed},
	phaseResuming:   {phaseReplaying, phaseLive, phaseConnecting, phaseClosed},
	phaseLive:       {phaseReplaying, phaseConnecting, phaseClosed},
	phaseReplaying:  {phaseLive, phaseConnecting, phaseResuming, phaseSnapshot, phaseClosed},
	phaseSnapshot:   {phaseLive, phaseConnecting, phaseReplaying, phaseClosed},
	phaseClosed:     nil,
}

// allowed reports whether the table has from → to.
func allowed(from, to phase) bool {
	for _, p := range transitions[from] {
		if p == to {
			return true
		}
	}
	return false
}

// strayTransitions counts transitions the table does not allow (a bug):
// logged at error level, and the package's tests fail on any.
var strayTransitions atomic.Uint64

// phaseLocked is the phase the stream's sequencing state is in.
func (st *stream) phaseLocked() phase {
	s := &st.s
	switch {
	case s.closed:
		return phaseClosed
	case s.snapshotting:
		return phaseSnapshot
	case s.replaying:
		return phaseReplaying
	case !s.has:
		return phaseConnecting
	case s.rs.pending:
		return phaseResuming
	}
	return phaseLive
}

// stateLocked is the readiness view of the phase and its conditions
// (EndpointStatus.State).
func (st *stream) stateLocked() StreamState {
	s := &st.s
	synced := st.synced.Load()
	// Bind mode: an engine connection owns the endpoint. A quiet recycle's
	// socket is being recreated: the subscription counts as up until the
	// new one is dialled or fails (recycle).
	up := st.connected.Load() || st.recycling.Load()
	switch {
	case s.replaying && !s.quietCheck:
		// A quiet check (a tail or join probe, the check after a quiet
		// recycle) is made on a stream with no sign of loss and normally
		// finds nothing: readiness keeps the state below, so a router in
		// front of idle engines does not turn not-ready each time one is
		// checked.
		return StateReplaying
	case s.degraded || st.incompleteLocked() || st.silentLocked():
		return StateDegraded
	case !up && synced:
		return StateDegraded
	case up && (synced || st.rc == nil):
		// Without a replay address there is nothing to catch up on: the
		// stream is as complete as it will get once it is subscribed.
		return StateLive
	}
	return StateConnecting
}

// lock takes the stream's lock; unlock records the transition the locked
// section made before releasing it.
func (st *stream) lock() { st.mu.Lock() }

func (st *stream) unlock() {
	st.transitionLocked()
	st.mu.Unlock()
}

// transitionLocked is the one place a stream changes phase and readiness
// state: it compares both with what the sequencing state now says, records
// when each began (on the pool's clock; EndpointStatus.PhaseSince and
// Since, which Router.Ready's give-up clock reads), checks the move against
// the transition table and logs it. The state metric
// (kvroute_kv_events_stream_state) exports the recorded state.
func (st *stream) transitionLocked() {
	s := &st.s
	ph := st.phaseLocked()
	if ph == s.phase && (ph == phaseClosed || st.stateLocked() == s.state) {
		return
	}
	now := st.p.clock.Now()
	if ph != s.phase {
		if !allowed(s.phase, ph) {
			strayTransitions.Add(1)
			st.log.Error("KV-event stream moved outside its transition table", "from", s.phase, "to", ph)
		}
		st.log.Debug("KV-event stream phase", "from", s.phase, "to", ph,
			"in_phase", now.Sub(s.phaseSince), "applied_seq", s.appliedSeq())
		s.phase, s.phaseSince = ph, now
	}
	if ph == phaseClosed {
		return // the last readiness state stays
	}
	if state := st.stateLocked(); state != s.state {
		s.state, s.stateSince = state, now
	}
}

// setConnected records whether the stream's subscription (bind mode: an
// engine connection owning the endpoint) is up; it ends a recycle.
func (st *stream) setConnected(up bool) {
	st.lock()
	st.connected.Store(up)
	st.recycling.Store(false)
	st.unlock()
}

// recycle records that the subscription is down only because the socket of
// a quiet engine is being recreated (heartbeats off: the idle deadline
// passed). That is routine, not a lost connection: readiness keeps the
// state it had until the next dial succeeds or fails (setConnected), and
// the check after it is a quiet one (onConnect).
func (st *stream) recycle() {
	st.lock()
	st.connected.Store(false)
	st.recycling.Store(true)
	st.unlock()
}

// startPhaseLocked sets the phase a new stream starts in, and its first
// readiness state from what stateLocked reads: newStream calls it once
// the stream is complete (its replay client set), so the state does not
// depend on the order of newStream's assignments.
func (st *stream) startPhaseLocked(now time.Time) {
	st.s.phase, st.s.phaseSince = phaseConnecting, now
	st.s.state, st.s.stateSince = st.stateLocked(), now
}
