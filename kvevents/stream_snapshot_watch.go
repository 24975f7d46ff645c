package kvevents

import (
	"context"
	"errors"
	"sync/atomic"
	"time"
)

// snapStalled is the reason of kvroute_kv_events_snapshot_errors_total for
// a load abandoned by its watchdog: the engine's reply had not arrived
// while live messages waited longer than a replay of the same range is
// allowed.
const snapStalled = "stalled"

// errSnapshotStalled is the cancellation cause of a load whose reply did
// not arrive within its allowance while live messages waited for it.
var errSnapshotStalled = errors.New("kvevents: engine snapshot stalled while live messages waited")

// snapFetch is the hand-off between a load's fetch (runSnapshot) and its
// watchdog (watchSnapshot): whichever settles state first decides whether
// the reply counts (arrived) or the load was abandoned (stalled), so a
// reply that comes in as the watchdog gives up is either applied or
// discarded as stalled, and counted once either way.
type snapFetch struct {
	done  chan struct{} // closed once the fetch returned
	state atomic.Int32  // snapFetching, then snapArrived or snapAbandoned
}

// The states of a snapFetch.
const (
	snapFetching int32 = iota
	snapArrived
	snapAbandoned
)

// newSnapFetch returns the hand-off of a load whose fetch is under way.
func newSnapFetch() *snapFetch { return &snapFetch{done: make(chan struct{})} }

// arrived records that the fetch returned and reports whether its result
// stands: false when the watchdog abandoned the load first.
func (f *snapFetch) arrived() bool {
	ok := f.state.CompareAndSwap(snapFetching, snapArrived)
	close(f.done)
	return ok
}

// abandon records that the watchdog gives the load up and reports whether
// it did so first: false when the fetch had already returned.
func (f *snapFetch) abandon() bool {
	return f.state.CompareAndSwap(snapFetching, snapAbandoned)
}

// watchSnapshot bounds a snapshot load as watchReplay bounds a replay: while
// live messages are held for it and the engine's reply has not arrived
// (f.done still open), the load may last replayAllowance over the range of
// the replay it stands in for (from plan.from to the first held message or
// plan.known), from its start; past that it is cancelled with
// errSnapshotStalled and the stream falls back to that replay, as for a
// failed fetch. An engine that accepts the request and then stalls, or
// trickles the reply, would otherwise keep the live stream held until the
// hold is full or the client's overall timeout. Once the reply is in, only
// its application on the stream's worker remains, bounded by the byte cap,
// and the watchdog ends.
func (st *stream) watchSnapshot(ctx context.Context, cancel context.CancelCauseFunc, gen uint64, plan replayPlan, f *snapFetch) {
	defer st.wg.Done()
	tick := st.p.clock.NewTicker(max(st.p.cfg.ReplayGrace/8, 10*time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-f.done:
			return
		case <-tick.C():
		}
		if !st.snapshotOverdue(gen, plan) {
			continue
		}
		if f.abandon() {
			cancel(errSnapshotStalled)
		} // else the reply came in meanwhile: it applies
		return
	}
}

// snapshotOverdue reports whether generation gen's load keeps live
// messages waiting past its allowance.
func (st *stream) snapshotOverdue(gen uint64, plan replayPlan) bool {
	st.lock()
	defer st.unlock()
	s := &st.s
	if s.closed || s.gen != gen || !s.snapshotting || len(s.held) == 0 {
		return false
	}
	span := max(plan.known, s.held[0].seq, plan.from) - plan.from
	allowed := replayAllowance(st.p.cfg.ReplayGrace, span, st.p.cfg.ReplayMinRate)
	return st.p.clock.Now().Sub(s.replayStart) > allowed
}

// snapshotStalledLocked counts and logs the failed load's err if its
// watchdog abandoned it.
func (st *stream) snapshotStalledLocked(err error, took time.Duration) {
	if !errors.Is(err, errSnapshotStalled) {
		return
	}
	st.p.snm.refused(st.id, snapStalled)
	st.log.Warn("Engine snapshot stalled while live messages waited; abandoned",
		"snapshot", st.snapAddr, "took", took, "held", len(st.s.held),
		"grace", st.p.cfg.ReplayGrace, "min_rate", st.p.cfg.ReplayMinRate)
}
