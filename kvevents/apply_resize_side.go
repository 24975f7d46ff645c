package kvevents

// sideEntry is what the Applier remembers of one engine block of an
// endpoint whose block size is not a multiple of the index's (see
// apply_resize.go): the chain state at the block's end and how many router
// blocks it completes.
type sideEntry struct {
	synth    uint64   // synthetic hash of the last whole router block at or before the block's end
	left     []uint32 // the tokens after that router block, up to the block's end (fewer than the index's block size)
	salt     []string // extra keys of router block 0 while it is still open (hasSynth false)
	count    uint32   // router blocks this engine block completes
	refs     uint32   // stores of the block not yet removed
	hasSynth bool     // false while the chain has no whole router block yet
}

// sideTable maps an endpoint's engine hashes to their sideEntry, bounded to
// max entries: beyond it the oldest stored are forgotten (first-store order,
// approximately: a hash removed and stored again may go at its first
// store's turn).
type sideTable struct {
	m     map[uint64]*sideEntry
	order []uint64
	head  int
	max   int
}

func newSideTable(max int) *sideTable {
	return &sideTable{m: make(map[uint64]*sideEntry), max: max}
}

// get returns the entry of engine hash h. A nil table holds nothing.
func (t *sideTable) get(h uint64) (*sideEntry, bool) {
	if t == nil {
		return nil, false
	}
	e, ok := t.m[h]
	return e, ok
}

// put records a store of engine block h: a new entry, or one more reference
// to the known one (an engine announcing a second copy of a block).
func (t *sideTable) put(h uint64, e sideEntry) {
	if old, ok := t.m[h]; ok {
		old.refs++
		return
	}
	e.refs = 1
	t.m[h] = &e
	t.order = append(t.order, h)
	for len(t.m) > t.max && t.head < len(t.order) {
		delete(t.m, t.order[t.head])
		t.head++
	}
	if live := len(t.order) - t.head; live > 2*len(t.m)+64 {
		t.compact()
	} else if t.head > len(t.order)/2 {
		t.order = append(t.order[:0], t.order[t.head:]...)
		t.head = 0
	}
}

// compact drops from the store order the hashes no longer remembered (and
// the older of a hash listed twice), so that the order stays within a
// constant factor of the entries however many blocks come and go.
func (t *sideTable) compact() {
	seen := make(map[uint64]struct{}, len(t.m))
	keep := make([]uint64, 0, len(t.m))
	for i := len(t.order) - 1; i >= t.head; i-- {
		h := t.order[i]
		if _, ok := t.m[h]; !ok {
			continue
		}
		if _, dup := seen[h]; dup {
			continue
		}
		seen[h] = struct{}{}
		keep = append(keep, h)
	}
	for i, j := 0, len(keep)-1; i < j; i, j = i+1, j-1 {
		keep[i], keep[j] = keep[j], keep[i]
	}
	t.order, t.head = keep, 0
}

// ref adds (store) or removes one reference to engine block h and returns
// how many router blocks it completes; ok is false when h is unknown. An
// entry whose last reference goes is forgotten.
func (t *sideTable) ref(h uint64, store bool) (count uint32, ok bool) {
	e, ok := t.get(h)
	if !ok {
		return 0, false
	}
	if store {
		e.refs++
	} else if e.refs--; e.refs == 0 {
		delete(t.m, h)
	}
	return e.count, true
}

// len returns the number of engine blocks remembered.
func (t *sideTable) len() int {
	if t == nil {
		return 0
	}
	return len(t.m)
}
