package cluster

import (
	"encoding/binary"
	"time"

	"github.com/kvroute/kvroute/tokenload"
)

// Load changes (deltas). Every change of the replica's own load — a dispatch
// (+tokens, +1 request), a first chunk (-tokens), the end of a request
// (-tokens left, -1 request) — gets the next number of the replica's load
// sequence and travels to the peers in the next decision message, so a
// peer's view of this replica's load is a pub/sub hop old instead of a
// refresh plus a read period. The leased record stays the source of truth:
// it carries the sequence number up to which its totals include the
// changes, and a peer reading it discards the changes at or below that
// number and keeps the rest on top. So a lost message costs accuracy only
// until the next record, and a replica's load, changes included, disappears
// with its lease. The sequence starts at the replica's start time in
// microseconds, so a restarted replica (same ID) numbers above its previous
// life and its new record supersedes the old life's changes. On a clock
// behind its previous life's numbers it numbers below them: a record
// numbered below the last one read is then taken for a new life, and the
// changes pending from before it are dropped rather than kept on top.

// delta is one load change, queued for publishing or pending at a peer.
type delta struct {
	endpoint         string
	seq              uint64
	tokens, requests int64
	// recv is when a peer's change arrived here (Unix nanoseconds on the
	// replica's clock); 0 in the replica's own queue.
	recv int64
}

// deltaBytes is what one pending change counts against
// MaxPendingDeltaBytes.
func deltaBytes(endpoint string) int { return len(endpoint) + 48 }

// deltaQueue is the bounded, double-buffered queue of the replica's own
// load changes waiting to be published; push never allocates (the halves
// are allocated up front: 2 × DeltaQueue × 48 bytes, 96 KiB by default).
// A change that does not fit is dropped (counted): the peers then see this
// replica's load from its next record.
type deltaQueue struct {
	active, spare []delta
	n             int
	seq           uint64 // last number given
	// totals is the local load as the changes numbered up to seq sum it
	// (plus the tracker's load when the replica started observing it): what
	// a record publishes with seq. Its entries are endpoints with load, so
	// its size is bounded by the endpoints with open requests.
	totals map[string]localTotal
}

// localTotal is one endpoint's entry in deltaQueue.totals.
type localTotal struct{ tokens, requests int64 }

// observe is the tracker's load observer: it queues a change of the local
// load. It runs on the request path and only copies under the queue's lock.
func (r *Replica) observe(endpoint string, tokens, requests int64) {
	if r.cfg.DisableSharedDecisions {
		return
	}
	q := &r.q
	q.mu.Lock()
	dq := &r.dq
	t := dq.totals[endpoint] // counted even when not shared: the next record carries it
	t.tokens += tokens
	t.requests += requests
	dq.totals[endpoint] = t
	if q.closed || dq.n == len(dq.active) {
		q.mu.Unlock()
		r.met.deltasDropped[deltaDropQueueFull].Inc()
		return
	}
	dq.seq++
	dq.active[dq.n] = delta{endpoint: endpoint, seq: dq.seq, tokens: tokens, requests: requests}
	dq.n++
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// watchLoad makes the replica the tracker's load observer and starts its
// totals from the tracker's current load (load dispatched before has no
// numbered change, but its release will have one). Both happen under the
// lock that observe takes, so a change is either in the starting totals or
// observed; only a change whose counters move before the tracker is read
// and whose observer call comes after it is installed is counted twice,
// which cannot happen while the replica is built before its router routes.
func (r *Replica) watchLoad() {
	r.q.mu.Lock()
	defer r.q.mu.Unlock()
	r.tracker.SetObserver(r.observe)
	r.tracker.Range(func(ep string, tokens, requests int64) bool {
		r.dq.totals[ep] = localTotal{tokens, requests}
		return true
	})
}

// localLoad returns the local load a record publishes (at most
// MaxEndpoints endpoints) and the number of the last change it includes,
// and how many loaded endpoints it left out, by reason (recordDropMax:
// beyond MaxEndpoints; recordDropBytes: beyond what a record every peer
// accepts holds).
// With shared changes, the totals are the replica's own sum of the changes,
// taken under the lock that numbers them, so they include exactly the
// changes up to seq: a peer keeps those above seq on top of the record and
// counts each change once. The tracker's counters cannot serve here: they
// move before a change is numbered, so totals read from them include
// changes numbered after any seq read before them (which a peer then
// counted twice until the next record).
func (r *Replica) localLoad() (uint64, []EndpointLoad, [numRecordDrops]int) {
	var loads []EndpointLoad
	var left [numRecordDrops]int
	room := recordLoadBytes // what the loads may take of a record every peer accepts
	fits := func(ep string) bool {
		switch {
		case len(loads) >= r.cfg.MaxEndpoints:
			left[recordDropMax]++
			return false
		case loadWireBytes(ep) > room:
			left[recordDropBytes]++
			return false
		}
		room -= loadWireBytes(ep)
		return true
	}
	if r.cfg.DisableSharedDecisions { // no changes travel: the tracker's totals are the whole story
		r.tracker.Range(func(ep string, tokens, requests int64) bool {
			if (tokens > 0 || requests > 0) && fits(ep) {
				loads = append(loads, EndpointLoad{Endpoint: ep, Tokens: tokens, Requests: requests})
			}
			return true // on past MaxEndpoints: the endpoints left out are counted
		})
		return 0, loads, left
	}
	r.q.mu.Lock()
	defer r.q.mu.Unlock()
	for ep, t := range r.dq.totals {
		switch {
		case t.tokens == 0 && t.requests == 0:
			delete(r.dq.totals, ep) // idle: forgotten, so the map holds loaded endpoints only
		case (t.tokens > 0 || t.requests > 0) && fits(ep):
			loads = append(loads, EndpointLoad{Endpoint: ep, Tokens: t.tokens, Requests: t.requests})
		}
	}
	return r.dq.seq, loads, left
}

// recordLoadBytes is what a record's loads may take: maxRecordBytes less
// room for the rest (the magic and version, the snapshot URL of at most
// maxNameBytes, the time, the sequence number, the counts and the
// admission queues' few bands), so that a record never exceeds what peers
// accept. With MaxEndpoints endpoints of the longest names it binds, and
// the loads of the endpoints beyond it are left out of that record.
const recordLoadBytes = maxRecordBytes - 64<<10

// loadWireBytes is the most one endpoint's load takes in a record: its
// name with a 3-byte length and two 10-byte uvarints.
func loadWireBytes(ep string) int { return len(ep) + 3 + 2*binary.MaxVarintLen64 }

// peerView is what this replica holds of one peer's load beyond its last
// record: the record's sequence number and the peer's changes above it.
type peerView struct {
	seq      uint64    // of the last record read (0 before one)
	overflow bool      // a change was dropped for memory: ignore changes until the next record
	recorded bool      // a read has found this peer's record at least once
	created  time.Time // when the first change of this peer arrived
	pending  []delta
	// bytes is what pending counts against MaxPendingDeltaBytes. Every path
	// that drops a pending change takes its bytes off both bytes and
	// Replica.pendingBytes, which is the sum of the views' bytes: eviction
	// subtracts a view's bytes from the total.
	bytes int
}

// applyDelta applies one peer's load change received on the channel: at
// once to the tracker's peer load, and kept until a record of that peer
// includes it.
func (r *Replica) applyDelta(sender, endpoint []byte, seq uint64, tokens, requests int64) {
	if r.testHookApplyDelta != nil {
		r.testHookApplyDelta()
	}
	r.viewsMu.Lock()
	defer r.viewsMu.Unlock()
	if r.cleared.Load() { // read under viewsMu: entering degraded sets it before it clears the views
		r.met.deltasDropped[deltaDropDegraded].Inc()
		return // routing on local load only until Redis answers again
	}
	if !r.accepts(endpoint) {
		return
	}
	v := r.views[string(sender)]
	if v == nil {
		if len(r.views) >= r.cfg.MaxPeers {
			r.met.deltasDropped[deltaDropMemory].Inc()
			return
		}
		v = &peerView{created: r.now()}
		r.views[string(sender)] = v
	}
	if seq <= v.seq {
		r.met.deltasSuperseded.Inc() // the record we read already includes it
		return
	}
	size := deltaBytes(string(endpoint))
	if !v.overflow && r.pendingBytes+size > r.cfg.MaxPendingDeltaBytes {
		r.evictOverShareLocked(v, size)
	}
	if v.overflow || r.pendingBytes+size > r.cfg.MaxPendingDeltaBytes {
		v.overflow = true
		r.met.deltasDropped[deltaDropMemory].Inc()
		return
	}
	ep := string(endpoint)
	v.pending = append(v.pending, delta{endpoint: ep, seq: seq, tokens: tokens, requests: requests, recv: r.now().UnixNano()})
	v.bytes += size
	r.pendingBytes += size
	r.met.pendingBytes.Set(float64(r.pendingBytes))
	r.tracker.AddPeerLoad(ep, tokens, requests)
	r.met.deltasApplied.Inc()
}

// evictOverShareLocked makes room for a change of size bytes from v when
// the pending changes fill MaxPendingDeltaBytes: if v holds no more than its
// fair share (the bound divided among the peers with a view) once the change
// is added, the peer holding the most pending bytes, when that is over its
// share, loses all its pending changes (counted as dropped for memory; its
// load is its record's until its next record, as for any overflow). So a
// peer that floods changes its records never include (a broken or hostile
// replica) fills only its share, and the others' changes still apply.
func (r *Replica) evictOverShareLocked(v *peerView, size int) {
	share := r.cfg.MaxPendingDeltaBytes / max(len(r.views), 1)
	if v.bytes+size > share {
		return // v is the one over its share: its change is dropped
	}
	var hog *peerView
	for _, o := range r.views {
		if o != v && (hog == nil || o.bytes > hog.bytes) {
			hog = o
		}
	}
	if hog == nil || hog.bytes <= share {
		return
	}
	for _, d := range hog.pending {
		r.tracker.AddPeerLoad(d.endpoint, -d.tokens, -d.requests)
	}
	r.met.deltasDropped[deltaDropMemory].Add(float64(len(hog.pending)))
	r.pendingBytes -= hog.bytes
	clear(hog.pending)
	hog.pending, hog.bytes, hog.overflow = nil, 0, true
}

// mergeRecords replaces the peers' load with their records plus the
// changes above each record's sequence number: live maps peer ID to its
// record, and listed holds every peer ID the read found in the member set.
// A peer listed without a live record (lease expired, left, unreadable), or
// whose record an earlier read found and this one did not, is forgotten
// with its pending changes. A peer this read did not list and never found
// in a record, but whose changes arrived less than a lease ago, is a replica
// that registered after the read listed the members: its changes are kept
// (and counted) until a read finds its record, so that the dispatches are
// not dropped while the matching ends later subtract from the peer load. The
// tracker is updated under the same lock that applyDelta takes, so no change
// is lost between the two. The sums over the peers saturate at the int64
// range (tokenload.PeerLoad.Add): the wire accepts loads up to 2⁶² each.
func (r *Replica) mergeRecords(live map[string]Record, listed map[string]struct{}) {
	loads := make(map[string]tokenload.PeerLoad)
	now := r.now()
	r.viewsMu.Lock()
	defer r.viewsMu.Unlock()
	for id, v := range r.views {
		if _, ok := live[id]; ok {
			continue
		}
		_, isListed := listed[id]
		if isListed || v.recorded || now.Sub(v.created) >= r.cfg.Lease {
			r.dropView(id, v)
			continue
		}
		for _, d := range v.pending {
			loads[d.endpoint] = loads[d.endpoint].Add(d.tokens, d.requests)
		}
	}
	for id, rec := range live {
		v := r.views[id]
		if v == nil {
			v = &peerView{}
			r.views[id] = v
		}
		// A record numbered below the last one read is the peer's new life
		// (restarted under its ID with a clock behind its previous life's
		// numbers): the changes pending here may be the previous life's,
		// sent after its last record, which no record of the new life
		// includes or supersedes. None is kept; the new life's changes
		// among them are in its next record.
		// A change that arrived more than 2 × Lease ago preceded the
		// sending of this live record (sent within a lease, on clocks that
		// agree within one) and would be included in it: still above it,
		// it is numbered beyond anything the peer's records reach (a forged
		// or broken sender) and would stay on top for as long as the peer
		// lives. It is dropped, counted.
		restarted := v.recorded && rec.Seq < v.seq
		v.seq, v.overflow, v.recorded = rec.Seq, false, true
		expired := now.Add(-2 * r.cfg.Lease).UnixNano()
		kept := v.pending[:0]
		for _, d := range v.pending {
			switch {
			case d.seq > rec.Seq && !restarted && d.recv >= expired:
				kept = append(kept, d)
				continue
			case d.seq > rec.Seq && !restarted:
				r.met.deltasDropped[deltaDropStale].Inc()
			}
			r.pendingBytes -= deltaBytes(d.endpoint)
			v.bytes -= deltaBytes(d.endpoint)
		}
		clear(v.pending[len(kept):])
		v.pending = kept
		if cap(v.pending) > 64 && len(v.pending) < cap(v.pending)/4 {
			v.pending = append([]delta(nil), v.pending...) // release a burst's memory
		}
		for _, l := range rec.Loads {
			if !r.acceptsName(l.Endpoint) {
				continue
			}
			loads[l.Endpoint] = loads[l.Endpoint].Add(l.Tokens, l.Requests)
		}
		for _, d := range v.pending {
			loads[d.endpoint] = loads[d.endpoint].Add(d.tokens, d.requests)
		}
	}
	r.met.pendingBytes.Set(float64(r.pendingBytes))
	r.tracker.SetPeerLoads(loads)
}

// clearViews forgets every peer's load (degraded: local load only).
func (r *Replica) clearViews() {
	r.viewsMu.Lock()
	defer r.viewsMu.Unlock()
	for id, v := range r.views {
		r.dropView(id, v)
	}
	r.met.pendingBytes.Set(0)
	r.tracker.SetPeerLoads(nil)
}

func (r *Replica) dropView(id string, v *peerView) {
	for _, d := range v.pending {
		r.pendingBytes -= deltaBytes(d.endpoint)
	}
	delete(r.views, id)
}

// PendingDeltaBytes is the memory the peers' load changes not yet included
// in a record take here, as counted against MaxPendingDeltaBytes.
func (r *Replica) PendingDeltaBytes() int {
	r.viewsMu.Lock()
	defer r.viewsMu.Unlock()
	return r.pendingBytes
}
