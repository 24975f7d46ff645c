package kvevents

import (
	"context"
	"math"
	"time"
)

// watchReplay cuts a replay short when live messages wait for it and it
// has not covered them by ReplayGrace plus one second per ReplayMinRate
// batches of the range; waiting for a replay slot counts.
func (st *stream) watchReplay(ctx context.Context, cancel context.CancelCauseFunc, gen, from, known uint64) {
	defer st.wg.Done()
	tick := st.p.clock.NewTicker(max(st.p.cfg.ReplayGrace/8, 10*time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C():
		}
		st.lock()
		s := &st.s
		behind := false
		if !s.closed && s.gen == gen && s.replaying && len(s.held) > 0 {
			// The range to cover may be empty (a fresh engine's first live
			// message is the replay's start): the grace alone applies then.
			span := max(known, s.held[0].seq, from) - from
			allowed := replayAllowance(st.p.cfg.ReplayGrace, span, st.p.cfg.ReplayMinRate)
			covered := s.has && s.applied+1 >= s.held[0].seq
			behind = !covered && st.p.clock.Now().Sub(s.replayStart) > allowed
		}
		st.unlock()
		if behind {
			cancel(errCutShort)
			return
		}
	}
}

// replayAllowance is how long a replay of span batches may keep live
// messages waiting: grace plus one second per rate batches, saturating at
// the largest duration. A huge span (a live sequence far ahead of the
// watermark) or a grace near the largest duration must not wrap to a
// negative allowance that cuts the replay at the watchdog's first tick.
func replayAllowance(grace time.Duration, span uint64, rate int) time.Duration {
	r := uint64(max(rate, 1))
	secs := span / r
	if secs >= uint64(math.MaxInt64/time.Second) {
		return math.MaxInt64
	}
	// The fraction of a second left is below one second: no overflow.
	d := time.Duration(secs)*time.Second + time.Duration(float64(span%r)/float64(r)*float64(time.Second))
	if grace > math.MaxInt64-d {
		return math.MaxInt64
	}
	return grace + d
}
