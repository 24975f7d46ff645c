package kvevents

import (
	"strings"

	"github.com/kvroute/kvroute/kvevents/wire"
)

// snapshotRefs folds the reference counting a vLLM snapshot program relies
// on into what kvroute's index applies. vLLM's recorder (the revision
// kvevents/snapshot/protocol.go names) exports each resident block as: a
// store with its tokens (the teaching store), token-less stores that bring
// each scope (medium, group) to the block's residency count, and at the end
// a removal of the teaching store. It states that the consumer counts
// references per scope and hash, so that removal never evicts. kvroute's
// index does not count token-less GPU stores (it skips them) and evicts on
// the first removal, so applied as they are those chunks would leave every
// resident block out. While a snapshot loads, the stream therefore keeps
// the extra references token-less stores add, per scope and hash, and a
// removal only reaches the index for a hash whose extra references are
// spent. Memory: one map entry per block that had a token-less store, for
// the duration of the load.
type snapshotRefs struct {
	extra map[snapScope]map[uint64]int32
}

// snapScope is a reference scope: medium (GPU for "") and group.
type snapScope struct {
	medium string
	group  int
}

func scopeOf(e *wire.Event) snapScope {
	m := strings.ToUpper(e.Medium)
	if m == "" {
		m = "GPU"
	}
	return snapScope{medium: m, group: e.Group}
}

// filter rewrites b in place: token-less GPU stores become extra
// references (and leave the batch), removals drop the hashes whose extra
// references absorb them. A kept event is swapped into its place, not
// copied: the Decoder reuses each slot's slices for the next chunk, and a
// copy would leave two slots sharing one event's arrays, into which the
// next Decode would write two events.
func (r *snapshotRefs) filter(b *wire.Batch) {
	n := 0
	for i := range b.Events {
		e := &b.Events[i]
		switch {
		case e.Type == wire.EventBlockStored && len(e.TokenIDs) == 0 && scopeOf(e).medium == "GPU":
			r.add(scopeOf(e), e.BlockHashes)
			continue
		case e.Type == wire.EventBlockRemoved && len(e.RawHashes) == 0:
			e.BlockHashes = r.absorb(scopeOf(e), e.BlockHashes)
			if len(e.BlockHashes) == 0 {
				continue
			}
		case e.Type == wire.EventAllBlocksCleared:
			r.extra = nil
		}
		b.Events[n], b.Events[i] = b.Events[i], b.Events[n]
		n++
	}
	b.Events = b.Events[:n]
}

func (r *snapshotRefs) add(s snapScope, hashes []uint64) {
	if r.extra == nil {
		r.extra = map[snapScope]map[uint64]int32{}
	}
	m := r.extra[s]
	if m == nil {
		m = map[uint64]int32{}
		r.extra[s] = m
	}
	for _, h := range hashes {
		m[h]++
	}
}

// absorb returns the hashes whose removal reaches the index (in place).
func (r *snapshotRefs) absorb(s snapScope, hashes []uint64) []uint64 {
	m := r.extra[s]
	if len(m) == 0 {
		return hashes
	}
	keep := hashes[:0]
	for _, h := range hashes {
		if n := m[h]; n > 0 {
			if n == 1 {
				delete(m, h)
			} else {
				m[h] = n - 1
			}
			continue
		}
		keep = append(keep, h)
	}
	return keep
}
