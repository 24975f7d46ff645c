package cluster

import (
	"cmp"
	"slices"
	"sync"
	"sync/atomic"
)

// Admission queue depth shared between replicas. A replica's admission
// (package admission) queues requests per priority band when its endpoints
// are saturated; each replica's queue depth per band travels in its record
// (the periodic SET the lease refresh already makes: no extra Redis command
// and nothing on the request path), and the live peers' depths are summed
// at every read, so each replica can tell how many requests wait in the
// whole fleet. What a record says is checked: at most maxQueueBands bands,
// each priority named once and within ±maxQueuePriority, at most
// maxQueueRequests requests per band (else the record is invalid, counted
// in kvroute_cluster_invalid_records_total), and only the bands given to
// ShareQueues are summed (the others are dropped and counted in
// kvroute_cluster_queue_bands_dropped_total). A replica publishes as much:
// of its bands with requests waiting, those with a priority beyond
// ±maxQueuePriority and those beyond the first maxQueueBands are left out
// of its record, and so of its peers' sums, and counted at every refresh in
// kvroute_cluster_record_queue_bands_dropped_total by reason
// (priority_range, max_bands). A stale or departed peer's depth leaves the
// sum at the next read, as its load does; while degraded the sum is empty.

const (
	// maxQueueBands bounds the bands a record may list.
	maxQueueBands = 64
	// maxQueuePriority bounds a band's priority in absolute value.
	maxQueuePriority = 1 << 31
	// maxQueueRequests bounds one band's depth in a record.
	maxQueueRequests = 1 << 32
)

// QueueDepth is the number of requests waiting in one admission priority
// band, as a replica publishes it in its record and as PeerQueues sums it.
type QueueDepth struct {
	// Priority is the band's priority (admission.Objective.Priority).
	Priority int
	// Requests is the number of requests waiting in the band.
	Requests int64
}

// queueShare is the state of ShareQueues: the source of this replica's
// depths and the peers' summed depths.
type queueShare struct {
	mu    sync.Mutex
	bands []int                               // accepted from peers, sorted
	src   func(dst []QueueDepth) []QueueDepth // this replica's depths; nil: none published
	buf   []QueueDepth                        // refresh's scratch (one refresh at a time)
	peers atomic.Pointer[[]QueueDepth]        // live peers' sums, one per band of bands with requests
	gen   uint64                              // ShareQueues calls so far: whose stop still applies
}

// ShareQueues makes the replica publish its admission queue depths with its
// record and sum its live peers' depths for the given priority bands (a
// Controller's configured bands; a peer's other bands are dropped and
// counted). depths is called at every refresh, from the refresh goroutine,
// and appends the depth of each band to dst; it must not block for long.
// nil depths stops publishing. The admission calls it
// (admission.Controller.ShareQueues); PeerQueues reads the sums.
//
// stop stops publishing these depths unless a later ShareQueues replaced
// them meanwhile, so that a sharer that closes after another took the
// replica over leaves the other's sharing alone.
func (r *Replica) ShareQueues(bands []int, depths func(dst []QueueDepth) []QueueDepth) (stop func()) {
	if r == nil {
		return func() {}
	}
	b := slices.Clone(bands)
	slices.Sort(b)
	q := &r.queues
	q.mu.Lock()
	defer q.mu.Unlock()
	q.gen++
	gen := q.gen
	q.bands, q.src = slices.Compact(b), depths
	return func() {
		q.mu.Lock()
		defer q.mu.Unlock()
		if q.gen == gen {
			q.bands, q.src = nil, nil
		}
	}
}

// PeerQueues appends to dst the live peers' summed queue depth per band
// given to ShareQueues, highest priority first, as of the last read (bands
// where no peer has requests waiting are left out), and returns it. It reads memory only and
// does not allocate when dst has room. Empty while degraded.
func (r *Replica) PeerQueues(dst []QueueDepth) []QueueDepth {
	if r == nil {
		return dst
	}
	if p := r.queues.peers.Load(); p != nil {
		dst = append(dst, *p...)
	}
	return dst
}

// ownQueues returns this replica's depths to publish: the bands with
// requests waiting, as depths reported them (highest priority first, as the
// admission lists them), bounded as a decoder requires; the bands left out
// are counted.
func (r *Replica) ownQueues() []QueueDepth {
	r.queues.mu.Lock()
	defer r.queues.mu.Unlock()
	if r.queues.src == nil {
		return nil
	}
	all := r.queues.src(r.queues.buf[:0])
	r.queues.buf = all
	out := all[:0]
	var left [numQueueBandDrops]int
	for _, q := range all {
		switch {
		case q.Requests <= 0 || slices.ContainsFunc(out, func(o QueueDepth) bool { return o.Priority == q.Priority }):
		case q.Priority < -maxQueuePriority || q.Priority > maxQueuePriority:
			left[queueBandDropPriority]++
		case len(out) == maxQueueBands:
			left[queueBandDropMax]++
		default:
			out = append(out, QueueDepth{Priority: q.Priority, Requests: min(q.Requests, maxQueueRequests)})
		}
	}
	for i, n := range left {
		if n > 0 {
			r.met.recordQueueBandsDropped[i].Add(float64(n))
		}
	}
	return out
}

// sumQueues replaces the peers' summed depths with those of the live
// records (nil clears them).
func (r *Replica) sumQueues(live map[string]Record) {
	r.queues.mu.Lock()
	bands := r.queues.bands
	r.queues.mu.Unlock()
	var sums []QueueDepth
	for _, rec := range live {
		for _, q := range rec.Queues {
			i, ok := slices.BinarySearch(bands, q.Priority)
			if !ok {
				r.met.queueBandsDropped.Inc()
				continue
			}
			j := slices.IndexFunc(sums, func(s QueueDepth) bool { return s.Priority == bands[i] })
			if j < 0 {
				sums = append(sums, QueueDepth{Priority: bands[i]})
				j = len(sums) - 1
			}
			sums[j].Requests += q.Requests
		}
	}
	slices.SortFunc(sums, func(a, b QueueDepth) int { return cmp.Compare(b.Priority, a.Priority) })
	r.queues.peers.Store(&sums)
}

// queues decodes a record's queue section; every bound is checked.
func (r *reader) queues() []QueueDepth {
	n := r.count("queue band count", maxQueueBands, 2)
	if r.err == nil && n == 0 {
		r.fail("empty queue section") // never written: a record without depths has no section
	}
	if r.err != nil {
		return nil
	}
	qs := make([]QueueDepth, 0, n)
	for i := 0; i < n && r.err == nil; i++ {
		p, req := r.varint("priority"), r.uvarint("queued requests")
		switch {
		case r.err != nil:
		case p < -maxQueuePriority || p > maxQueuePriority || req > maxQueueRequests:
			r.fail("queue depth out of range")
		case slices.ContainsFunc(qs, func(q QueueDepth) bool { return q.Priority == int(p) }):
			r.fail("priority band listed twice")
		default:
			qs = append(qs, QueueDepth{Priority: int(p), Requests: int64(req)})
		}
	}
	return qs
}
