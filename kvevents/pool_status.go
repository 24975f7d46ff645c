package kvevents

import (
	"slices"
	"strings"
	"time"
)

// EndpointStatus is a point-in-time view of one endpoint's subscription.
type EndpointStatus struct {
	ID         string
	Connected  bool   // the SUB socket is connected; bind mode: an engine connection owns the endpoint
	Received   bool   // a message was received
	LastSeq    uint64 // last sequence received (wire watermark)
	HasApplied bool   // the index holds a contiguous run of the stream
	Applied    uint64 // last sequence applied (index watermark)
	// Snapshot is the engine's snapshot socket ("" without snapshots).
	Snapshot string
	// IndexSource is what the endpoint's entries were last rebuilt from:
	// "engine_snapshot", "replay" (the replay window), "recorded" (a
	// checkpoint file or a peer, verified by replay), "live" (the live
	// stream alone), or "" with nothing applied.
	IndexSource string
	Replaying   bool   // a replay is running
	Degraded    bool   // a gap without replay address, or one a replay gave up on: the index may hold stale blocks
	Messages    uint64 // messages applied, live and replayed
	Replay      string // replay address ("" = none)
	// Position is the watermark and the digest of the batch applied there
	// (meaningful with HasApplied and HasDigest).
	Position  Position
	HasDigest bool
	// ReplayingSince is when the running replay started (zero when none):
	// an endpoint stuck in a replay shows here and in
	// kvroute_kv_events_replay_in_progress.
	ReplayingSince time.Time
	// State is the stream's readiness: connecting, replaying, live or
	// degraded (see StreamState), and Since when the stream entered it, on
	// the pool's clock (Options.Clock).
	State StreamState
	Since time.Time
	// Phase is the stream's state-machine phase (connecting, resuming,
	// live, replaying or closed; see the package doc) and PhaseSince when it
	// entered it.
	Phase      string
	PhaseSince time.Time
	// LastApplied is when the last batch was applied (zero: never).
	LastApplied time.Time

	// PublisherID is the identity of the publisher's current lifetime
	// (vLLM's publisher_id, or SGLang's topic epoch: the UUID when the
	// epoch is one, else a hash of it), valid when HasPublisherID.
	PublisherID    [16]byte
	HasPublisherID bool
	// Heartbeats: the publisher sends vLLM's identities or idle
	// heartbeats, so its silence is checked (PoolConfig.PublisherSilence)
	// (SGLang's epoch does not count: it sends no heartbeats). Silent: it fell
	// silent, and the endpoint is degraded until it is heard again.
	// LastHeard is when it was last heard (zero: not watched).
	Heartbeats bool
	Silent     bool
	LastHeard  time.Time
}

// Status returns the state of the endpoint with this ID.
func (p *Pool) Status(id string) (EndpointStatus, bool) {
	st := p.stream(id)
	if st == nil {
		return EndpointStatus{}, false
	}
	return st.status(), true
}

// Statuses returns the state of every endpoint with a stream, sorted by ID:
// one view of the endpoint set, unlike Endpoints followed by Status for each,
// which can miss a stream removed in between while one added in between is
// not listed. Router readiness and the state collector (NewStateCollector)
// read it: an endpoint replaced by one that
// has not caught up (Ensure of the new one, then Remove of the old) must
// not leave a moment with neither in view, which reads as caught up. A
// stream removed after the view was taken reports its last state.
func (p *Pool) Statuses() []EndpointStatus {
	p.mu.Lock()
	sts := make([]*stream, 0, len(p.streams))
	for _, st := range p.streams {
		sts = append(sts, st)
	}
	p.mu.Unlock()
	out := make([]EndpointStatus, 0, len(sts))
	for _, st := range sts {
		out = append(out, st.status())
	}
	slices.SortFunc(out, func(a, b EndpointStatus) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// Endpoints returns the IDs of the endpoints with a stream (per-endpoint
// mode: subscribed; bind mode: seen on the bind socket), sorted.
func (p *Pool) Endpoints() []string {
	p.mu.Lock()
	ids := make([]string, 0, len(p.streams))
	for id := range p.streams {
		ids = append(ids, id)
	}
	p.mu.Unlock()
	slices.Sort(ids)
	return ids
}

// PoolStats are pool-wide counters since NewPool.
type PoolStats struct {
	Applied      uint64 // messages applied to the index (live and replayed)
	StoredBlocks uint64 // blocks of BlockStored events the index accepted
}

// Stats returns the pool-wide counters.
func (p *Pool) Stats() PoolStats {
	return PoolStats{Applied: p.applied.Load(), StoredBlocks: p.storedBlocks.Load()}
}
