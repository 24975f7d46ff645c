package kvindex

import (
	"sync"
	"sync/atomic"
	"unsafe"
)

// engPool holds the engine-hash entries that several endpoints share: the
// (engine hash, key) pairs that two or more endpoints each stored
// themselves, as engines of one model do for the blocks they all cache.
// Each entry is stored once with a count of the endpoints referring to it
// (engTable keeps a 4-byte reference per endpoint, in place of the 16-byte
// pair) and is freed when the
// last one lets go.
//
// The pool has no index of its own: an endpoint finds a shared entry only
// through another endpoint that stored the same engine hash for the same
// key (engTable.adopt), so a pair is shared only between endpoints that
// each announced it, and no endpoint ever resolves a hash it did not store
// (two models, or a hostile endpoint, announcing the same engine hash for
// other content get entries of their own).
//
// Entries live in fixed-size chunks reached through a fixed directory, so
// growing the pool never moves an entry or the directory: an endpoint
// reads the hash and key of an entry it refers to without the pool's lock
// (they do not change while it is referred to, and the reference reached
// the endpoint under the mutex of the endpoint that published it). The
// reference counts and the free list are guarded by mu.
type engPool struct {
	mu    sync.Mutex
	dir   *[poolDirSize]*poolChunk // allocated by the first share (128 KiB)
	n     uint32                   // entries ever allocated (high-water mark)
	free  uint32                   // head of the free list + 1; 0 = empty
	live  int64                    // entries in use
	bytes *atomic.Int64
}

const (
	poolChunkBits = 13 // 8,192 entries, 160 KiB per chunk
	poolChunkSize = 1 << poolChunkBits
	poolDirSize   = 1 << 14 // room for 2^27 shared entries
)

// poolChunk keeps the counts apart from the entries so that a chunk is
// exactly 20 bytes per entry.
type poolChunk struct {
	e  [poolChunkSize]engEntry
	rc [poolChunkSize]uint32
}

// newEngPool returns an empty pool that adds the accounted bytes of its
// entries (costSharedEntry each) to bytes.
func newEngPool(bytes *atomic.Int64) *engPool { return &engPool{bytes: bytes} }

// entry returns the entry of index i; the caller refers to it.
func (p *engPool) entry(i uint32) *engEntry {
	return &p.dir[i>>poolChunkBits].e[i&(poolChunkSize-1)]
}

// share returns the index of a new entry (h, key) referred to by refs
// endpoints, or false when the pool is full.
func (p *engPool) share(h uint64, key Key, refs uint32) (uint32, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var i uint32
	switch {
	case p.free != 0:
		i = p.free - 1
		p.free = uint32(p.entry(i).key)
	case p.n < poolDirSize*poolChunkSize:
		i = p.n
		if p.dir == nil {
			p.dir = new([poolDirSize]*poolChunk)
		}
		if p.dir[i>>poolChunkBits] == nil {
			p.dir[i>>poolChunkBits] = new(poolChunk)
		}
		p.n++
	default:
		return 0, false
	}
	*p.entry(i) = engEntry{hash: h, key: key}
	p.dir[i>>poolChunkBits].rc[i&(poolChunkSize-1)] = refs
	p.live++
	p.bytes.Add(costSharedEntry)
	return i, true
}

// acquire adds a reference to entry i.
func (p *engPool) acquire(i uint32) {
	p.mu.Lock()
	p.dir[i>>poolChunkBits].rc[i&(poolChunkSize-1)]++
	p.mu.Unlock()
}

// release drops a reference to entry i, freeing it with the last one.
func (p *engPool) release(i uint32) {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := p.dir[i>>poolChunkBits]
	if c.rc[i&(poolChunkSize-1)]--; c.rc[i&(poolChunkSize-1)] > 0 {
		return
	}
	c.e[i&(poolChunkSize-1)] = engEntry{key: Key(p.free)}
	p.free = i + 1
	p.live--
	p.bytes.Add(-costSharedEntry)
	if p.live == 0 { // release the chunks
		for j := range (p.n + poolChunkSize - 1) / poolChunkSize {
			p.dir[j] = nil
		}
		p.n, p.free = 0, 0
	}
}

// Len returns the number of shared entries.
func (p *engPool) Len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return int(p.live)
}

// heapBytes returns the heap the pool holds, for tests and benchmarks.
func (p *engPool) heapBytes() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.dir == nil {
		return 0
	}
	n := int(unsafe.Sizeof(*p.dir))
	for _, c := range p.dir {
		if c != nil {
			n += int(unsafe.Sizeof(*c))
		}
	}
	return n
}

// shareTries is how many other holders of a block shareEntry asks at most.
const shareTries = 4

// shareEntry makes ep's engine-hash entry for h, just stored for block key
// that the endpoint with ID first also holds, share the entry of a holder
// that stored the same key for h: first, then up to shareTries-1 others
// (engines hashing with another seed hold the block under other hashes).
// ep.mu is held. Other endpoints' mutexes are only tried, never waited for,
// so two endpoints sharing with each other cannot deadlock; an entry that
// finds the holders busy stays private, which costs memory and changes
// nothing else.
func (ix *Index) shareEntry(ep *endpoint, h uint64, key Key, first uint32) {
	if ix.shareWith(ep, h, first) {
		return
	}
	v, ok := ix.blocks.Load(key)
	if !ok {
		return
	}
	var buf memberBuf
	tries := 1
	for _, m := range v.members(&buf) {
		if id := memberID(m); id != ep.id && id != first && !isSpec(m) {
			if tries++; tries > shareTries || ix.shareWith(ep, h, id) {
				return
			}
		}
	}
}

// shareWith tries to share ep's entry for h with the endpoint of ID id and
// reports whether ep's entry is shared afterwards.
func (ix *Index) shareWith(ep *endpoint, h uint64, id uint32) bool {
	o, ok := ix.byID.Load(id)
	if !ok || o == ep || !o.mu.TryLock() {
		return false
	}
	defer o.mu.Unlock()
	if o.dead || !ep.eng.adopt(h, o.eng) {
		return false
	}
	ix.account(o)
	return true
}
