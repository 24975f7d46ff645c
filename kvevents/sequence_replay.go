package kvevents

import (
	"context"
	"errors"
	"time"

	"github.com/kvroute/kvroute/replay"
)

// Replay outcomes: the result label of kvroute_kv_events_replays_total.
const (
	ReplayComplete = "complete" // the gap was filled
	ReplayPartial  = "partial"  // the buffer no longer held the gap: rebuilt from the replay window
	ReplayFailed   = "failed"   // the replay client gave up
)

// errSuperseded aborts a replay whose stream was restarted or closed.
var errSuperseded = errors.New("kvevents: replay superseded")

// startReplayLocked starts the stream's replay goroutine from sequence
// from. known is the highest sequence known to exist (the message that
// revealed the gap): a replay that returns nothing up to it lost the range.
func (st *stream) startReplayLocked(from uint64, reason string, known uint64) {
	s := &st.s
	ctx, cancel := context.WithCancel(st.ctx)
	s.replaying, s.resync, s.cancelReplay = true, false, cancel
	st.wg.Add(1)
	go st.runReplay(ctx, cancel, s.gen, from, reason, known)
}

// runReplay fetches the batches from `from` on and applies them; see the
// stream doc comment for the rules.
func (st *stream) runReplay(ctx context.Context, cancel context.CancelFunc, gen, from uint64, reason string, known uint64) {
	defer st.wg.Done()
	defer cancel()
	dec := NewDecoder(st.p.cfg.Limits)
	var b Batch
	first, covered := true, true
	res, err := st.rc.Replay(ctx, st.replayAddr, from, func(seq uint64, payload []byte) error {
		st.mu.Lock()
		defer st.mu.Unlock()
		s := &st.s
		if s.closed || s.gen != gen {
			return errSuperseded
		}
		if first {
			first = false
			if seq != from {
				covered = false
				st.lostRangeLocked(from, seq-1)
			}
		}
		switch {
		case !s.has || seq == s.applied+1:
			st.applyLocked(seq, payload, "", dec, &b)
		case seq <= s.applied:
			// Already applied.
		default:
			// The client delivers contiguous sequences; be safe anyway.
			covered = false
			st.lostRangeLocked(s.applied+1, seq-1)
			st.applyLocked(seq, payload, "", dec, &b)
		}
		return nil
	})

	st.mu.Lock()
	defer st.mu.Unlock()
	s := &st.s
	if s.closed || s.gen != gen {
		return // a restart or Remove took over
	}
	s.replaying, s.cancelReplay = false, nil
	result := ReplayComplete
	switch {
	case err != nil:
		result = ReplayFailed
		var rerr *replay.Error
		if errors.As(err, &rerr) && rerr.Op == replay.OpNoProgress {
			st.p.m.ZMQErrors.WithLabelValues(st.id, rerr.Op).Inc()
		}
		s.cooldownUntil = time.Now().Add(st.p.cfg.ReplayCooldown)
		st.log.Warn("Replay failed", "reason", reason, "from", from, "batches", res.Batches,
			"cooldown", st.p.cfg.ReplayCooldown, "err", err)
	case !covered:
		result = ReplayPartial
	case res.Batches == 0 && known > from:
		// Nothing from `from` on although `known` was published after it:
		// the range is gone. (known itself may not be buffered yet: vLLM
		// sends a batch before it buffers it.)
		result = ReplayPartial
		st.lostRangeLocked(from, known-1)
	}
	st.p.m.Replays.WithLabelValues(st.id, result).Inc()
	if err == nil {
		st.log.Info("Replay complete", "reason", reason, "from", from, "batches", res.Batches,
			"result", result, "layout", res.Layout, "applied", s.applied)
	}
	st.drainHeldLocked(dec, &b)
	if !s.replaying && s.resync {
		s.resync = false
		st.resyncLocked()
	}
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

// drainHeldLocked runs the messages held during the replay through the
// sequencing rules, in arrival order. If one of them starts another replay,
// the rest are held again.
func (st *stream) drainHeldLocked(dec *Decoder, b *Batch) {
	held := st.s.held
	st.s.held, st.s.heldBytes = nil, 0
	for i := range held {
		if st.s.replaying {
			for _, it := range held[i:] {
				st.s.held = append(st.s.held, it)
				st.s.heldBytes += len(it.payload)
			}
			return
		}
		st.sequenceLocked(held[i], dec, b)
	}
}
