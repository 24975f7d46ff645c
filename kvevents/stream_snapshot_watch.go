package kvevents

import (
	"context"
	"errors"
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

// watchSnapshot bounds a snapshot load as watchReplay bounds a replay: while
// live messages are held for it and the engine's reply has not arrived
// (fetched still open), the load may last replayAllowance over the range of
// the replay it stands in for (from plan.from to the first held message or
// plan.known), from its start; past that it is cancelled with
// errSnapshotStalled and the stream falls back to that replay, as for a
// failed fetch. An engine that accepts the request and then stalls, or
// trickles the reply, would otherwise keep the live stream held until the
// hold is full or the client's overall timeout. Once the reply is in, only
// its application on the stream's worker remains, bounded by the byte cap,
// and the watchdog ends.
func (st *stream) watchSnapshot(ctx context.Context, cancel context.CancelCauseFunc, gen uint64, plan replayPlan, fetched <-chan struct{}) {
	defer st.wg.Done()
	tick := st.p.clock.NewTicker(max(st.p.cfg.ReplayGrace/8, 10*time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-fetched:
			return
		case <-tick.C():
		}
		if !st.snapshotOverdue(gen, plan) {
			continue
		}
		select {
		case <-fetched:
			return // the reply came in meanwhile: let it apply
		default:
		}
		cancel(errSnapshotStalled)
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
