package kvindex

// The snapshot code reads and rebuilds index internals only through the
// functions of this file, so that a change of the index's memory layout
// (block values, membership words, engine-hash tables) touches the snapshot
// in this one place.

// snapEndpointNames returns the names of every registered endpoint and of
// every endpoint with a position lock.
func (ix *Index) snapEndpointNames() []string {
	seen := make(map[string]struct{})
	ix.eps.Range(func(name string, _ *endpoint) bool {
		seen[name] = struct{}{}
		return true
	})
	ix.positions.Range(func(k, _ any) bool {
		seen[k.(string)] = struct{}{}
		return true
	})
	names := make([]string, 0, len(seen))
	for n := range seen {
		names = append(names, n)
	}
	return names
}

// snapTierNames returns the index's tier names by tier ID.
func (ix *Index) snapTierNames() []string { return ix.tiers.Load().names }

// snapEntries calls f for every engine-hash entry of ep, oldest first (the
// order capacity eviction follows), with the confirmed (tier, group, count)
// pairs of its block — nil when the endpoint holds the block only
// speculatively or not at all. pairs is only valid during the call. ep.mu
// is held.
func (ix *Index) snapEntries(ep *endpoint, f func(hash uint64, key Key, pairs []pair)) {
	var buf []pair
	ep.eng.Each(func(h uint64, key Key) {
		buf = buf[:0]
		if v, ok := ix.blocks.Load(key); ok {
			if m, _ := v.find(ep.id); m != 0 && !isSpec(m) {
				var cx []pair
				if m&complexBit != 0 {
					cx = ep.cx[key]
				}
				buf = decodePairs(buf, m, cx)
			}
		}
		f(h, key, buf)
	})
}

// snapEntryCount returns the number of engine-hash entries of ep; ep.mu is
// held.
func snapEntryCount(ep *endpoint) int { return ep.eng.Len() }

// snapHasEntries reports whether ep holds anything (entries or speculative
// memberships); ep.mu is held.
func snapHasEntries(ep *endpoint) bool { return ep.eng.Len() > 0 || len(ep.spec) > 0 }

// snapRestoreEntry maps hash to key on ep and sets ep's confirmed
// membership of key to pairs (when non-empty), replacing any membership the
// endpoint has on the block (a snapshot lists a key once per engine hash
// mapped to it, with the same pairs each time). ep.mu is held and ep was
// registered by the restore.
func (ix *Index) snapRestoreEntry(ep *endpoint, hash uint64, key Key, pairs []pair) {
	prev, known := ep.eng.Put(hash, key)
	if known && prev != key {
		ix.apply(ep, prev, &memberOp{kind: opDrop})
	}
	if len(pairs) == 0 {
		return
	}
	var other uint32
	defer func() {
		if other != 0 && (!known || prev != key) {
			ix.shareEntry(ep, hash, key, other)
		}
	}()
	ix.blocks.Compute(key, func(v blockVal, loaded bool) (blockVal, bool) {
		old, idx := uint64(0), -1
		if loaded {
			old, idx = v.find(ep.id)
			other = otherHolder(&v, ep.id)
		}
		if isSpec(old) {
			ix.nSpec.Add(-1)
			old = 0
		}
		nw := ep.encode(key, old, pairs)
		nv := v.withBuf(idx, nw, &ep.arr) // the map copies it into its arena
		if idx < 0 {
			ix.nMembers.Add(1)
			ep.members++
			if !loaded {
				ix.nBlocks.Add(1)
			}
		}
		return nv, nv.count() == 0
	})
}
