package kvevents

// trigger is why a stream starts a replay. It decides, in one place
// (planReplayLocked), what the replay asks for and how its outcome is read;
// logs show it as the replay's reason.
type trigger string

// The replay triggers.
const (
	trigConnect   trigger = "connect"   // subscribed (or first message) with no watermark: replay from 0
	trigRestart   trigger = "restart"   // the sequence went backwards, or the reconnect check found another batch: from 0
	trigGap       trigger = "gap"       // a live sequence skipped: from applied+1
	trigCatchUp   trigger = "catch_up"  // a queue dropped a message: from applied+1 up to the wire watermark
	trigReconnect trigger = "reconnect" // the subscription was re-established, or a recorded position is checked: from applied, digest verified
	trigTail      trigger = "tail"      // the stream went quiet after traffic: was its tail lost? From applied, digest verified
	trigJoin      trigger = "join"      // the connect replay found nothing: was a batch lost while the subscription was set up? From 0
	trigModel     trigger = "model"     // batches were keyed under a wrong guessed model: from 0 under the right one
	trigRepair    trigger = "repair"    // an earlier replay left a hole: from applied+1 up to it
	trigRebuild   trigger = "rebuild"   // history lost by a cut-short replay: from 0, waiting for a slot detached
	trigResync    trigger = "resync"    // Pool.Resync: from 0 after clearing
)

// replayPlan is what one replay does, decided from its trigger.
type replayPlan struct {
	trigger trigger
	from    uint64 // first sequence asked for
	// known is the highest sequence known to exist (the message that
	// revealed the gap, the wire watermark, the end of a hole; 0: none): a
	// replay that returns nothing up to it lost the range.
	known uint64
	// verify: the first batch must be the one at the watermark with the
	// digest applied there; another one (or none) means the engine
	// restarted.
	verify bool
	// probe: a check that normally finds nothing; finding nothing counts in
	// probes_total, not as a replay, and a check that cannot be made starts
	// no cooldown.
	probe bool
	// quiet: a probe on a stream with no sign of loss (a tail or join
	// probe, the check after a quiet recycle): readiness keeps the state
	// it had while it runs (stateLocked).
	quiet bool
	// detached: the replay waits for its slot without holding live
	// messages, and attaches (clears the endpoint, holds live messages)
	// when its first batch arrives (replay_rebuild.go).
	detached bool
	// noSnapshot: the replay runs even where a snapshot load would
	// replace it, and does not turn into one when it finds its range gone
	// from the buffer (the fallback of a failed load; stream_snapshot.go).
	noSnapshot bool
}

// planReplayLocked plans the replay a trigger asks for; seen is the live
// sequence that triggered it (0: none).
func (st *stream) planReplayLocked(t trigger, seen uint64) replayPlan {
	s := &st.s
	p := replayPlan{trigger: t, known: seen}
	switch t {
	case trigConnect, trigRestart, trigJoin:
		// from 0, bounded by the live message that triggered it
	case trigModel, trigResync:
		p.known = st.lastSeen.Load()
	case trigRebuild:
		p.known, p.detached = 0, true
	case trigGap:
		p.from = s.applied + 1
	case trigCatchUp:
		p.from, p.known = s.applied+1, st.lastSeen.Load()
	case trigRepair:
		p.from, p.known = s.applied+1, s.holeTo
	case trigReconnect, trigTail:
		// A tail probe is the reconnect check: it may fall due while the
		// subscription is down (the subscriber backing off, or not yet
		// aware), and an engine restarted meanwhile answers from its new
		// lifetime; only the digest at the watermark tells.
		p.from = s.applied + 1
		if s.has && s.hasDigest {
			p.from, p.verify = s.applied, true // the batch at the watermark itself
		}
	}
	if s.rs.pending && s.has && s.hasDigest && !p.verify && p.from == s.applied+1 {
		// A recorded position is still unverified (its check failed, or was
		// cut short): a replay from after it (a catch-up or repair) is its
		// check, from the position itself with the digest compared, and
		// ends it as the check does (stream_resume.go): entries kept when
		// the digest matches, the gap rules when the position left the
		// buffer. From after it, a window that lost the range would clear
		// the restored entries with no resume outcome.
		p.from, p.verify = s.applied, true
	}
	p.probe = t == trigTail || t == trigReconnect || t == trigJoin
	p.quiet = t == trigTail || t == trigJoin
	return p
}
