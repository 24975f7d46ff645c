package kvindex

// Memory of the non-prefix cache groups (groups.go). Each block a group
// holds costs an entry of its engine-hash map (uint64 → hashRef, a 24-byte
// slot) and one of its key map (Key → uint32, a 16-byte slot), at Go's map
// load of 7/16 to 7/8 with a control byte per slot: between 58 and 94
// bytes together depending on where the maps are between two growths,
// charged at 74 (TestGroupBytesTrackHeap measures it). They count in the
// index's accounted bytes (Config.MaxBytes) like every other entry, charged
// to their endpoint: memory eviction picks the endpoint with the most bytes,
// groups included, and evicting one of its oldest full-attention blocks
// also forgets that block in its groups (a group block without its
// full-attention block never lengthens a match), then, with no
// full-attention block left, its groups' entries altogether.
const (
	// costGroupHash is an entry of a group's engine-hash map.
	costGroupHash = 44
	// costGroupKey is an entry of a group's key map.
	costGroupKey = 30
)

// accountGroups recomputes hy's accounted bytes and adds the change to the
// index total. hy.mu is held.
func (ix *Index) accountGroups(hy *hybridEP) {
	var b int64
	for _, g := range hy.groups {
		b += int64(len(g.byHash))*costGroupHash + int64(len(g.held))*costGroupKey
	}
	if d := b - hy.bytes.Load(); d != 0 {
		hy.bytes.Store(b)
		ix.nBytes.Add(d)
	}
}

// groupBytes returns the accounted bytes of endpoint's groups (0 without).
func (ix *Index) groupBytes(endpoint string) int64 {
	if ix.nHybrid.Load() == 0 {
		return 0
	}
	if hy, ok := ix.hybrid.Load(endpoint); ok {
		return hy.bytes.Load()
	}
	return 0
}

// forgetGroupHash drops engine hash h from every group of hy, whatever its
// store count: its full-attention block was evicted. It takes hy.mu.
func (ix *Index) forgetGroupHash(hy *hybridEP, h uint64) {
	hy.mu.Lock()
	defer hy.mu.Unlock()
	for _, g := range hy.groups {
		if r, ok := g.byHash[h]; ok {
			delete(g.byHash, h)
			ix.dropGroupKey(g, r.key, r.n)
		}
	}
	ix.accountGroups(hy)
}

// forgetGroupEntries empties every group of hy (their kinds and windows
// stay). It takes hy.mu and reports whether anything was dropped.
func (ix *Index) forgetGroupEntries(hy *hybridEP) bool {
	hy.mu.Lock()
	defer hy.mu.Unlock()
	any := false
	for _, g := range hy.groups {
		if len(g.byHash) > 0 || len(g.held) > 0 {
			any = true
			clear(g.byHash)
			clear(g.held)
		}
	}
	ix.accountGroups(hy)
	return any
}
