package kvindex

import "sync/atomic"

// Memory accounting. Each endpoint is charged a fixed cost per entry it
// owns in the index's structures, and the index's accounted bytes are the
// sum over its endpoints. The costs are the structures' average heap per
// entry (BenchmarkMemory and TestAccountedBytesTrackHeap measure them), so
// the accounted bytes follow the heap the entries use without reading any
// table sizes: keeping them current costs Store one recount and one atomic
// add, and Match nothing.
const (
	// costMembership is a (block, endpoint) membership's share of the
	// block map: a 16-byte slot at a load between 5/8 and 13/16 for a
	// block with one holder (20 to 26 bytes, about 23 on average), or a
	// quarter of a slot and of the member array with its garbage and slack
	// for a block four endpoints hold (about 10.5 bytes per membership when
	// their IDs span fewer than 64, in the two-word implicit form; about 17
	// in the full form). It is charged alike for both, near the first: a
	// bound on bytes must not be exceeded where blocks have one holder.
	costMembership = 22
	// costEngEntry is an endpoint's engine-hash entry: a 4-byte unit in
	// the endpoint's slab and its 4-byte index slot at a load between 5/8
	// and 13/16.
	costEngEntry = 10
	// costPrivateEntry is what an engine-hash entry no other endpoint
	// shares takes on top: three more units for its (hash, key) pair, and
	// its bits.
	costPrivateEntry = 13
	// costSharedEntry is a (hash, key) pair several endpoints share, with
	// its reference count, in the index's pool (engpool.go). The pool
	// charges it to the index, not to any of its holders.
	costSharedEntry = 20
	// costComplex is an entry of an endpoint's side table of complex
	// memberships (map[Key][]pair): key, slice header, the backing array
	// of up to complexPairs pairs and the map's slack.
	costComplex = 96
	// complexPairs is the number of pairs costComplex covers.
	complexPairs = 2
	// costComplexPair is each further pair a side-table entry's backing
	// array has room for (its capacity, which append rounds up to the
	// allocation's size class): 12 bytes. A membership has at most 2,048
	// pairs (8 tiers in 256 groups).
	costComplexPair = 12
	// costSpecEntry is an entry of an endpoint's list of speculative
	// entries to expire (16 bytes, in an append-grown slice).
	costSpecEntry = 24
)

// account recomputes ep's accounted bytes from its entry counts and adds
// the change to the index total. ep.mu is held.
func (ix *Index) account(ep *endpoint) {
	b := int64(ep.members)*costMembership + int64(ep.eng.Len())*costEngEntry + int64(ep.eng.Private())*costPrivateEntry +
		int64(len(ep.cx))*costComplex + int64(ep.cxExtra)*costComplexPair + int64(len(ep.spec))*costSpecEntry
	if d := b - ep.bytes.Load(); d != 0 {
		ep.bytes.Store(b)
		ix.nBytes.Add(d)
	}
}

// enforceMemory evicts while the index holds more than its byte bound,
// down to a little below it (1/1024 of the bound, so that a flood pays the
// scan for the largest endpoint once per many stores, not on every one).
// Each round takes the endpoint holding the most accounted bytes, drops its
// speculative entries and evicts its oldest stored blocks until it is no
// longer the largest. It
// holds no endpoint's lock on entry and at most one at a time.
func (ix *Index) enforceMemory() {
	if ix.nBytes.Load() <= ix.maxBytes {
		return
	}
	ix.memMu.Lock()
	defer ix.memMu.Unlock()
	target := ix.maxBytes - ix.maxBytes/1024
	for ix.nBytes.Load() > target {
		var victim *endpoint
		var top, second int64
		ix.eps.Range(func(name string, ep *endpoint) bool {
			switch b := ep.bytes.Load() + ix.groupBytes(name); {
			case b > top:
				victim, top, second = ep, b, top
			case b > second:
				second = b
			}
			return true
		})
		if victim == nil || !ix.evictForMemory(victim, target, second) {
			return // nothing left to evict (or only what others add meanwhile)
		}
	}
}

// evictForMemory drops ep's speculative entries, then evicts its oldest
// stored blocks (and their entries in ep's non-prefix groups,
// groups_mem.go) while the index is above target and ep holds at least
// second bytes (the next largest endpoint's), then, if it has no stored
// blocks left, its groups' entries. It reports whether anything was
// evicted.
func (ix *Index) evictForMemory(ep *endpoint, target, second int64) (progress bool) {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	if ep.dead {
		return true // cleared meanwhile: look again
	}
	var hy *hybridEP
	if ix.nHybrid.Load() > 0 {
		hy, _ = ix.hybrid.Load(ep.name)
	}
	total := func() int64 {
		b := ep.bytes.Load()
		if hy != nil {
			b += hy.bytes.Load()
		}
		return b
	}
	start := total()
	if len(ep.spec) > 0 {
		// Guesses go before what the engine confirmed: a flood of
		// speculative entries (a broken peer replica's decisions naming
		// this endpoint) must not push out the blocks its engine reported.
		ix.dropSpeculative(ep)
		ix.account(ep)
	}
	for ix.nBytes.Load() > target && total() >= second {
		h, ok := ix.evictOldestHash(ep, &ix.evMemory)
		if !ok {
			ix.dropSpeculative(ep)
			if hy != nil {
				ix.forgetGroupEntries(hy)
			}
			break
		}
		if hy != nil {
			ix.forgetGroupHash(hy, h)
		}
		ix.account(ep)
	}
	ix.account(ep)
	return total() < start
}

// evictOldest evicts ep's oldest stored block (see enforceCapacity),
// counting it in ev when a membership went away. It reports false when ep
// has no stored blocks. ep.mu is held.
func (ix *Index) evictOldest(ep *endpoint, ev *atomic.Uint64) bool {
	_, ok := ix.evictOldestHash(ep, ev)
	return ok
}

// evictOldestHash is evictOldest, returning the evicted engine hash.
func (ix *Index) evictOldestHash(ep *endpoint, ev *atomic.Uint64) (uint64, bool) {
	h, key, ok := ep.eng.PopOldest()
	if !ok {
		return 0, false
	}
	op := memberOp{kind: opDrop}
	ix.apply(ep, key, &op)
	if op.before != 0 {
		ev.Add(1)
	}
	return h, true
}

// dropSpeculative removes all of ep's speculative memberships, counted as
// memory evictions; confirmed memberships stay. ep.mu is held.
func (ix *Index) dropSpeculative(ep *endpoint) {
	for _, e := range ep.spec {
		op := memberOp{kind: opExpire, exp: maxExpiry}
		ix.apply(ep, e.key, &op)
		if op.before != 0 && op.after == 0 {
			ix.evMemory.Add(1)
		}
	}
	ep.spec, ep.specMin = nil, 0
}
