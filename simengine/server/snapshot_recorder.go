package server

import (
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/kvroute/kvroute/kvevents/wire"
	"github.com/kvroute/kvroute/simengine"
)

// Chunking of a snapshot reply, as vLLM's recorder chunks it.
const (
	snapshotEventsPerChunk = 256
)

// snapRecord is one block the recorder knows: its hash inputs, how many
// blocks of its hash are resident (the engine's pool may hold several, each
// stored and evicted with an event of its own), and how many known blocks
// name it as their parent (a dead block stays while it has children, so
// they can still be taught).
type snapRecord struct {
	parent    uint64
	hasParent bool
	tokens    []uint32
	blockSize int
	loraID    int
	loraName  string
	extra     []simengine.ExtraKey
	kind      string
	live      int
	children  int
}

// groupMember is a block a hybrid engine's sliding-window or Mamba group
// holds, with what its store named, and how many copies of it (a group
// that computes a block it holds stores it again, as vLLM's, and removes
// each copy on its own).
type groupMember struct {
	blockSize int
	loraID    int
	loraName  string
	kind      string
	window    int
	live      int
}

// snapshotRecorder folds the published batches into the engine's resident
// blocks, like vLLM's KVEventSnapshotRecorder, and exports them as the
// events that rebuild them: every block stored with its tokens, parents
// first, then the token-less stores of a hybrid engine's other groups
// (each group's residency is its own: a group's removal of a hash leaves
// the other groups' alone), then the removal of the blocks taught only as
// parents or for another group. It is fed by the publishing goroutine
// right after each batch got its sequence, so a snapshot is consistent
// with the sequence it reports.
type snapshotRecorder struct {
	format wire.Format
	now    func() time.Time

	mu               sync.Mutex
	seq              int64                          // last folded sequence; -1 before the first
	blocks           map[uint64]*snapRecord         // the full-attention group, and the blocks the other groups name
	groups           map[int]map[uint64]groupMember // the other groups' resident blocks, by group_idx
	full             int                            // the full-attention group's group_idx, from its stores
	unavailableUntil time.Time
}

func newSnapshotRecorder(f wire.Format) *snapshotRecorder {
	return &snapshotRecorder{format: f, now: time.Now, seq: -1, blocks: map[uint64]*snapRecord{},
		groups: map[int]map[uint64]groupMember{}}
}

// unavailableFor makes the recorder answer "unavailable" for d from now
// (a recorder still starting, or one that stopped and recovers).
func (r *snapshotRecorder) unavailableFor(d time.Duration) {
	r.mu.Lock()
	r.unavailableUntil = r.now().Add(d)
	r.mu.Unlock()
}

// record folds batch seq.
func (r *snapshotRecorder) record(seq uint64, b simengine.EventBatch) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seq = int64(seq)
	for i := range b.Events {
		ev := &b.Events[i]
		// A hybrid engine may number any group 0 (HybridConfig.GroupOrder):
		// a store names its group's kind, a removal only its index, one of
		// a group that stored before.
		_, other := r.groups[ev.GroupIdx]
		switch {
		case ev.Type == simengine.BlockStored && ev.Kind != simengine.KindFullAttention && ev.Kind != "":
			r.storeGroup(ev)
		case ev.Type == simengine.BlockStored:
			r.full = ev.GroupIdx
			r.store(ev)
		case ev.Type == simengine.BlockRemoved && other:
			for _, h := range ev.BlockHashes {
				g := r.groups[ev.GroupIdx]
				if m, ok := g[h]; ok && m.live > 1 {
					m.live--
					g[h] = m
					continue
				}
				delete(g, h)
				if rec := r.blocks[h]; rec != nil {
					r.drop(h, rec)
				}
			}
		case ev.Type == simengine.BlockRemoved:
			for _, h := range ev.BlockHashes {
				if rec := r.blocks[h]; rec != nil && rec.live > 0 {
					rec.live--
					r.drop(h, rec)
				}
			}
		case ev.Type == simengine.AllBlocksCleared:
			clear(r.groups)
			for h, rec := range r.blocks {
				rec.live = 0
				r.drop(h, rec)
			}
		}
	}
}

func (r *snapshotRecorder) store(ev *simengine.Event) {
	parent, hasParent := ev.ParentHash, ev.HasParent
	for i, h := range ev.BlockHashes {
		rec := r.blocks[h]
		if rec == nil {
			rec = &snapRecord{parent: parent, hasParent: hasParent, blockSize: ev.BlockSize,
				tokens: slices.Clone(ev.TokenIDs[i*ev.BlockSize : (i+1)*ev.BlockSize]),
				loraID: ev.LoRAID, loraName: ev.LoRAName, kind: ev.Kind}
			if i < len(ev.ExtraKeys) {
				rec.extra = slices.Clone(ev.ExtraKeys[i])
			}
			if p := r.blocks[parent]; hasParent && p != nil {
				p.children++
			}
			r.blocks[h] = rec
		}
		rec.live++
		parent, hasParent = h, true
	}
}

// storeGroup folds a store of a sliding-window or Mamba group (its hashes:
// the tokens are the full-attention group's).
func (r *snapshotRecorder) storeGroup(ev *simengine.Event) {
	g := r.groups[ev.GroupIdx]
	if g == nil {
		g = map[uint64]groupMember{}
		r.groups[ev.GroupIdx] = g
	}
	for _, h := range ev.BlockHashes {
		g[h] = groupMember{blockSize: ev.BlockSize, loraID: ev.LoRAID, loraName: ev.LoRAName,
			kind: ev.Kind, window: ev.SlidingWindow, live: g[h].live + 1}
	}
}

// inGroup reports whether a sliding-window or Mamba group holds h.
func (r *snapshotRecorder) inGroup(h uint64) bool {
	for _, g := range r.groups {
		if _, ok := g[h]; ok {
			return true
		}
	}
	return false
}

// drop forgets a dead block without children that no other group holds,
// and then its dead parents that no longer have any: a block another group
// holds keeps its tokens, which teach the index the hash that group names.
func (r *snapshotRecorder) drop(h uint64, rec *snapRecord) {
	for rec.live == 0 && rec.children == 0 && !r.inGroup(h) {
		delete(r.blocks, h)
		if !rec.hasParent {
			return
		}
		p := r.blocks[rec.parent]
		if p == nil {
			return
		}
		p.children--
		h, rec = rec.parent, p
	}
}

// Snapshot implements snapshot.Source.
func (r *snapshotRecorder) Snapshot() (int64, [][]byte, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.now().Before(r.unavailableUntil) {
		return 0, nil, false
	}
	children := map[uint64][]uint64{}
	var roots []uint64
	for h, rec := range r.blocks {
		if p := r.blocks[rec.parent]; rec.hasParent && p != nil {
			children[rec.parent] = append(children[rec.parent], h)
		} else {
			roots = append(roots, h)
		}
	}
	slices.Sort(roots)
	ts := r.now()
	var chunks [][]byte
	var events []simengine.Event
	var wb wire.Batch
	flush := func(force bool) {
		if len(events) == 0 || (!force && len(events) < snapshotEventsPerChunk) {
			return
		}
		ToKVEventsBatch(&wb, simengine.EventBatch{Time: ts, Events: events})
		chunks = append(chunks, wire.AppendBatch(nil, &wb, r.format))
		events = events[:0]
	}
	var dead []uint64
	stack := slices.Clone(roots)
	for len(stack) > 0 {
		h := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		rec := r.blocks[h]
		ev := simengine.Event{Type: simengine.BlockStored, BlockHashes: []uint64{h}, ParentHash: rec.parent,
			HasParent: rec.hasParent && r.blocks[rec.parent] != nil, TokenIDs: rec.tokens, BlockSize: rec.blockSize,
			LoRAID: rec.loraID, LoRAName: rec.loraName, Medium: simengine.MediumGPU, GroupIdx: r.full, Kind: rec.kind}
		if rec.extra != nil {
			ev.ExtraKeys = [][]simengine.ExtraKey{rec.extra}
		}
		events = append(events, ev)
		flush(false)
		for range rec.live - 1 { // the other resident blocks of its hash
			events = append(events, ev)
			flush(false)
		}
		if rec.live == 0 {
			dead = append(dead, h)
		}
		cs := children[h]
		slices.Sort(cs)
		stack = append(stack, cs...)
	}
	gids := slices.Sorted(maps.Keys(r.groups))
	for _, g := range gids {
		for _, h := range slices.Sorted(maps.Keys(r.groups[g])) {
			m := r.groups[g][h]
			for range m.live { // one store per copy
				events = append(events, simengine.Event{Type: simengine.BlockStored, BlockHashes: []uint64{h},
					BlockSize: m.blockSize, LoRAID: m.loraID, LoRAName: m.loraName, Medium: simengine.MediumGPU,
					GroupIdx: g, Kind: m.kind, SlidingWindow: m.window})
				flush(false)
			}
		}
	}
	for _, h := range dead {
		events = append(events, simengine.Event{Type: simengine.BlockRemoved, BlockHashes: []uint64{h}, Medium: simengine.MediumGPU, GroupIdx: r.full})
		flush(false)
	}
	flush(true)
	return r.seq, chunks, true
}
