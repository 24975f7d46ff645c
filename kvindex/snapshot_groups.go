package kvindex

import (
	"encoding/binary"
	"fmt"
	"slices"
)

// The groups part of a snapshot section (format version 2; see
// snapshot_format.go): an endpoint's non-prefix cache groups with their
// kind, window and engine-hash entries, so a checkpoint or a peer's
// snapshot restores a hybrid model's endpoint with the same usable
// prefixes as the index it was written from.

// maxSnapWindow bounds a sliding window read from a snapshot.
const maxSnapWindow = 1<<31 - 1

// encodeGroups appends the groups part of endpoint name's section to buf
// (the endpoint's lock is held when hasEP; without an endpoint there are
// no groups). It takes the groups' read lock, after the endpoint's, as
// memory eviction does.
func (ix *Index) encodeGroups(buf []byte, name string, hasEP bool, se *SnapshotEndpoint) []byte {
	var hy *hybridEP
	if hasEP && ix.nHybrid.Load() > 0 {
		hy, _ = ix.hybrid.Load(name)
	}
	if hy == nil {
		return binary.AppendUvarint(buf, 0)
	}
	hy.mu.RLock()
	defer hy.mu.RUnlock()
	groups := slices.Clone(hy.groups)
	slices.SortFunc(groups, func(a, b *groupSet) int { return int(a.group) - int(b.group) })
	buf = binary.AppendUvarint(buf, uint64(len(groups)))
	hashes := make([]uint64, 0, 64)
	for _, g := range groups {
		buf = binary.AppendUvarint(buf, uint64(g.group))
		buf = append(buf, byte(g.kind))
		window := 0
		if g.kind == GroupSlidingWindow {
			window = g.window
		}
		buf = binary.AppendUvarint(buf, uint64(window))
		buf = binary.AppendUvarint(buf, uint64(len(g.byHash)))
		hashes = hashes[:0]
		for h := range g.byHash {
			hashes = append(hashes, h)
		}
		slices.Sort(hashes) // a deterministic section for the same contents
		for _, h := range hashes {
			r := g.byHash[h]
			buf = binary.LittleEndian.AppendUint64(buf, h)
			buf = binary.LittleEndian.AppendUint64(buf, uint64(r.key))
			buf = binary.AppendUvarint(buf, uint64(r.n))
		}
		se.Groups++
		se.GroupEntries += len(g.byHash)
	}
	return buf
}

// parseGroups parses and bounds-checks the groups part at c, calling v
// (when set) for each group and entry.
func (ix *Index) parseGroups(c *secCursor, v *sectionVisitor, se *SnapshotEndpoint) {
	ng := c.uvarint("group count", maxGroupsTracked)
	var seen [maxGroupsTracked]int32
	for i := uint64(0); i < ng && c.err == nil; i++ {
		index := int32(c.uvarint("group index", maxGroupIndex)) // as Store and RemoveGroup take it: a group beyond could never be removed
		kind := GroupKind(c.u8("group kind"))
		window := c.uvarint("group window", maxSnapWindow)
		ne := c.uvarint("group entry count", 1<<62)
		if c.err != nil {
			return
		}
		switch {
		case kind != GroupSlidingWindow && kind != GroupMamba:
			c.failf("group %d: kind %d", index, kind)
		case kind == GroupSlidingWindow && window == 0:
			c.failf("group %d: sliding window without a window", index)
		case kind == GroupMamba && window != 0:
			c.failf("group %d: Mamba group with a window", index)
		case slices.Contains(seen[:i], index):
			c.failf("group %d listed twice", index)
		case ne > uint64(ix.maxBlocks):
			c.err = fmt.Errorf("%w: endpoint %q group %d has %d blocks, this index holds at most %d per group",
				ErrSnapshotTooLarge, se.Name, index, ne, ix.maxBlocks)
		case ne > uint64(c.left)/17: // an entry takes at least 17 bytes
			c.failf("group %d: %d entries in %d bytes", index, ne, c.left)
		}
		if c.err != nil {
			return
		}
		seen[i] = index
		if v != nil && v.group != nil {
			v.group(index, kind, int(window))
		}
		for j := uint64(0); j < ne && c.err == nil; j++ {
			h := c.u64("group engine hash")
			key := Key(c.u64("group key"))
			n := c.uvarint("group store count", maxSnapshotCount)
			if c.err != nil {
				return
			}
			if key == 0 || n == 0 {
				c.failf("group %d: zero key or store count", index)
				return
			}
			if v != nil && v.groupEntry != nil {
				v.groupEntry(h, key, uint32(n))
			}
		}
		se.Groups++
		se.GroupEntries += int(ne)
	}
}

// groupLoader applies a validated groups part to an endpoint whose lock is
// held (lock order: the endpoint's, then its groups').
type groupLoader struct {
	hy *hybridEP // locked while loading
	gs *groupSet // the group being loaded
}

// group starts loading group index of endpoint.
func (l *groupLoader) group(ix *Index, endpoint string, index int32, kind GroupKind, window int) {
	if l.hy == nil {
		l.hy = ix.lockHybrid(endpoint)
	}
	l.gs = l.hy.find(index)
	if l.gs == nil {
		if len(l.hy.groups) >= maxGroupsTracked {
			return // cannot happen: a section lists at most maxGroupsTracked distinct groups into an endpoint restored empty
		}
		l.gs = &groupSet{group: index, kind: kind, byHash: map[uint64]hashRef{}, held: map[Key]uint32{}}
		l.hy.groups = append(l.hy.groups, l.gs)
		ix.nHybrid.Add(1)
		ix.gen.Add(1)
	}
	l.gs.kind, l.gs.window = kind, window
}

// entry adds count stores of hash (mapped to key) to the current group,
// as StoreGroup would (a hash listed twice adds up, or replaces its key).
func (l *groupLoader) entry(hash uint64, key Key, count uint32) {
	gs := l.gs
	if gs == nil {
		return
	}
	r, ok := gs.byHash[hash]
	if ok && r.key != key {
		if c := gs.held[r.key]; c > r.n {
			gs.held[r.key] = c - r.n
		} else {
			delete(gs.held, r.key)
		}
		r.n = 0
	}
	n := uint32(min(uint64(r.n)+uint64(count), maxSnapshotCount))
	gs.byHash[hash] = hashRef{key: key, n: n}
	gs.held[key] = uint32(min(uint64(gs.held[key])+uint64(count), maxSnapshotCount))
}

// finish accounts the loaded groups and unlocks them.
func (l *groupLoader) finish(ix *Index) {
	if l.hy != nil {
		ix.accountGroups(l.hy)
		l.hy.mu.Unlock()
		l.hy = nil
	}
}
