package kvevents

// onConnect runs on the supervisor each time the subscription is
// established. vLLM publishes nothing while idle, so without it a router
// started (or reconnected) next to an idle engine would know nothing of the
// engine's cache until the engine's next batch. With a replay address:
//
//   - no watermark: replay from 0 now ("Requesting proactive replay on
//     connect"). The model comes from the endpoint's configuration, an
//     earlier live message, or the replies' topic frame; when none names
//     it, replayed batches wait (bounded) for the first live message. If
//     the buffer is empty nothing is applied and the first live message
//     still triggers the join replay (needJoin stays set), so a batch
//     published while the subscription was being set up is not missed;
//   - a watermark: replay from applied itself (reason "reconnect") and
//     compare the digest, recovering batches published while the
//     subscription was down even if the engine then stays silent, and
//     detecting an engine that restarted meanwhile. Finding nothing new
//     counts as a probe, not a replay.
//
// quiet: the connection follows a quiet recycle (heartbeats off, the idle
// deadline passed on an idle engine), not a lost connection. Its check is
// a quiet one, like a tail probe, keeping the stream's readiness state
// while it runs (what it finds is applied all the same): the reconnect
// check, or with no watermark on a stream already caught up (its connect
// replay found nothing) the join probe instead of another connect replay.
func (st *stream) onConnect(quiet bool) {
	st.liveConn.Store(false) // the live stream shows nothing on this connection yet
	if st.rc == nil {
		return
	}
	st.sequenced(func() { st.onConnectLocked(quiet) })
}

func (st *stream) onConnectLocked(quiet bool) {
	s := &st.s
	st.adoptPositionLocked()
	if s.closed || s.replaying || st.coolingLocked() {
		return
	}
	if !s.has {
		if !s.needJoin || s.restarted {
			return // a restart replays from 0 with its first message
		}
		if quiet && st.synced.Load() {
			s.probeArmed = false // a join probe due later would ask the same
			st.startReplayLocked(st.planReplayLocked(trigJoin, 0))
			return
		}
		st.log.Info("Requesting proactive replay on connect", "seq", "none", "replay", st.replayAddr)
		st.startReplayLocked(st.planReplayLocked(trigConnect, 0))
		return
	}
	// From applied itself to compare the digest (from applied+1 without one).
	plan := st.planReplayLocked(trigReconnect, 0)
	plan.quiet = quiet
	st.startReplayLocked(plan)
}

// armProbeLocked notes traffic and (re)starts the tail-probe timer. A
// publisher that sends heartbeats is never probed: its next heartbeat, a
// second away, shows a lost tail as a gap (stream_liveness.go).
func (st *stream) armProbeLocked() {
	d := st.p.cfg.TailProbeDelay
	if st.rc == nil || d <= 0 || st.s.closed || st.lv.watched.Load() {
		return
	}
	st.s.probeArmed = true
	if st.probeT == nil {
		st.probeT = st.p.clock.AfterFunc(d, st.tailProbe)
		return
	}
	st.probeT.Reset(d)
}

// tailProbe runs once a stream has been quiet for TailProbeDelay after
// traffic: a publisher's HWM may have dropped the end of a burst, and with
// the engine idle no later batch would reveal the gap. It asks the replay
// socket for anything after the watermark; normally the answer is empty.
// It is the reconnect check (from the watermark itself, digest compared):
// it can fall due while the subscription is down and the engine restarts,
// and its new lifetime, already past the watermark, must not be applied on
// top of the old one's entries.
func (st *stream) tailProbe() { st.sequenced(st.tailProbeLocked) }

func (st *stream) tailProbeLocked() {
	s := &st.s
	if s.closed || !s.probeArmed {
		return
	}
	if s.replaying || st.coolingLocked() {
		// Not now, but not dropped: a replay still running may end before
		// the tail it was not asked for was published, and a cooldown
		// ends on its own. Nothing else would arm the probe again while
		// the engine idles, so the tail would stay lost until its next
		// message. Try again a probe delay (or the rest of the cooldown)
		// from now.
		d := st.p.cfg.TailProbeDelay
		if left := s.cooldownUntil.Sub(st.p.clock.Now()); left > d {
			d = left
		}
		st.probeT.Reset(d)
		return
	}
	s.probeArmed = false
	if !s.has {
		// The join probe (runReplay arms it after an empty connect
		// replay): still nothing applied.
		if s.needJoin && !s.restarted {
			st.startReplayLocked(st.planReplayLocked(trigJoin, 0))
		}
		return
	}
	st.startReplayLocked(st.planReplayLocked(trigTail, 0))
}
