package kvevents

import "context"

// Replay slots are process-wide (replay.DefaultLimiter, 8 by default), so
// hostile or stuck replay sockets elsewhere can hold all of them. A replay
// that live messages wait for is cut short when it has not covered them in
// time (waiting for a slot included), and the endpoint applies its live
// stream from the first held message: its entries are then correct but lack
// what came before (the batches an engine published before the router
// subscribed, or the endpoint's earlier history and the gap). That loss is
// recorded (lostHistory; the endpoint is degraded) and recovered by a
// rebuild, which must not freeze the live stream again while it queues:
//
//   - the rebuild is a replay from 0 that waits for its slot detached: live
//     messages keep being applied as they come;
//   - when its first batch arrives (it holds a slot, the publisher answers)
//     it attaches: the endpoint is cleared, live messages are held from now
//     on and the replay rebuilds the entries from the publisher's buffer, up
//     to and past the held messages, like any replay (the watchdog runs from
//     the attach on);
//   - it starts at once after a replay that was cut short before any batch
//     came (it was starved of a slot), else one ReplayCooldown later (a
//     publisher too slow to replay at ReplayMinRate); a rebuild that fails
//     is tried again one ReplayCooldown later (replay_repair.go).
//
// While a rebuild waits, no other replay starts for the endpoint (gaps are
// handled as during a cooldown); a restart or Resync cancels it.

// startRebuildLocked starts a detached rebuild.
func (st *stream) startRebuildLocked() {
	s := &st.s
	ctx, cancel := context.WithCancelCause(st.ctx)
	s.rebuilding, s.cancelReplay = true, func() { cancel(errSuperseded) }
	st.log.Info("Rebuilding the endpoint from its replay buffer once a replay slot is free",
		"applied_seq", s.appliedSeq())
	st.wg.Add(1)
	go st.runReplay(ctx, cancel, s.gen, st.planReplayLocked(trigRebuild, 0))
}

// attachRebuildLocked turns a waiting rebuild into a running replay when
// its first batch arrives.
func (st *stream) attachRebuildLocked(ctx context.Context, cancel context.CancelCauseFunc, gen, known uint64) {
	s := &st.s
	s.rebuilding = false
	// No pending resume here: a rebuild recovers history lost when a
	// replay was cut short, which cleared the endpoint (and counted a
	// pending resume, clearLocked) or found it empty; a position is
	// adopted once, before any replay.
	removed := st.clearLocked()
	s.lostHistory = true // until the rebuild completes
	s.needJoin = false
	s.replaying, s.quietCheck, s.replayStart, s.heldMax = true, false, st.p.clock.Now(), 0
	st.inProgress.Set(1)
	st.log.Info("Rebuild has its replay slot: endpoint cleared, replaying from 0", "blocks_removed", removed)
	st.wg.Add(1)
	go st.watchReplay(ctx, cancel, gen, 0, known)
}
