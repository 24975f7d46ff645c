package simengine

// blockPool is the paged KV cache: NumGPUBlocks blocks (with
// Config.NullBlock, block 0 is vLLM's null block: never free, never
// allocated, so one block fewer is usable), reference counts, a
// prefix-cache map from (group, block digest) to the blocks holding it, and
// vLLM's free queue. Freed blocks keep their hash and stay hittable until they
// are reused: allocation pops the least recently freed block and, if it still
// carries a hash, evicts it lazily (vLLM's _maybe_evict_cached_block),
// reporting the group and hash.
//
// Every KV-cache group allocates from this one pool, as every group of a
// vLLM hybrid model does from its coordinator's single BlockPool: a cached
// block is keyed by its group and digest, and the free queue holds the freed
// blocks of every group, least recently freed first whatever their group.
// Without Config.Hybrid the only group is full attention, group 0.
//
// Like vLLM, two requests that compute the same block concurrently each cache
// their own copy under the same hash; eviction then reports each copy, and a
// prefix hit takes the copy cached first (BlockPool.get_cached_block).
type blockPool struct {
	ref    []int32
	hash   []gkey // the group and digest a block caches, where hashed
	hashed []bool
	// free queue: doubly linked list over block IDs, -1 terminated.
	prev, next []int32
	inFree     []bool
	head, tail int32
	free       int
	// prefix-cache map: (group, digest) → first block cached with it; chain
	// links the later copies in caching order.
	cached  map[gkey]int32
	chain   []int32
	nHashed int
	usable  int // blocks that can be allocated: n, or n-1 with a null block
}

func newBlockPool(n int, null bool) *blockPool {
	p := &blockPool{
		ref: make([]int32, n), hash: make([]gkey, n), hashed: make([]bool, n),
		prev: make([]int32, n), next: make([]int32, n), inFree: make([]bool, n),
		head: -1, tail: -1, cached: make(map[gkey]int32), chain: make([]int32, n),
	}
	for i := range n {
		p.pushTail(int32(i))
	}
	p.usable = n
	if null {
		// As vLLM's BlockPool pops its null block off the free queue.
		p.unlink(0)
		p.ref[0] = 1
		p.usable--
	}
	return p
}

func (p *blockPool) pushTail(b int32) {
	p.prev[b], p.next[b] = p.tail, -1
	if p.tail >= 0 {
		p.next[p.tail] = b
	} else {
		p.head = b
	}
	p.tail = b
	p.inFree[b] = true
	p.free++
}

func (p *blockPool) unlink(b int32) {
	if p.prev[b] >= 0 {
		p.next[p.prev[b]] = p.next[b]
	} else {
		p.head = p.next[b]
	}
	if p.next[b] >= 0 {
		p.prev[p.next[b]] = p.prev[b]
	} else {
		p.tail = p.prev[b]
	}
	p.inFree[b] = false
	p.free--
}

// lookup returns the block cached first among those holding k.
func (p *blockPool) lookup(k gkey) (int32, bool) {
	b, ok := p.cached[k]
	return b, ok
}

// has reports whether a block holds k.
func (p *blockPool) has(k gkey) bool {
	_, ok := p.cached[k]
	return ok
}

// touch takes a reference on a cached block found by lookup (a prefix hit).
func (p *blockPool) touch(b int32) {
	if p.ref[b] == 0 && p.inFree[b] {
		p.unlink(b)
	}
	p.ref[b]++
}

// allocate pops the head of the free queue. If the block still carried a hash it
// is evicted from the prefix cache and its group and digest are returned with
// wasCached=true. The caller must have checked that a free block exists.
func (p *blockPool) allocate() (b int32, evicted gkey, wasCached bool) {
	b = p.head
	p.unlink(b)
	if p.hashed[b] {
		evicted, wasCached = p.hash[b], true
		p.uncache(b)
	}
	p.ref[b] = 1
	return b, evicted, wasCached
}

// release drops a reference; a block reaching zero joins the tail of the free
// queue with its hash kept.
func (p *blockPool) release(b int32) {
	p.ref[b]--
	if p.ref[b] == 0 {
		p.pushTail(b)
	}
}

// cache records that block b now holds group k.group's full block k.d.
func (p *blockPool) cache(b int32, k gkey) {
	p.hash[b], p.hashed[b] = k, true
	p.nHashed++
	p.chain[b] = -1
	first, ok := p.cached[k]
	if !ok {
		p.cached[k] = b
		return
	}
	last := first
	for p.chain[last] >= 0 {
		last = p.chain[last]
	}
	p.chain[last] = b
}

func (p *blockPool) uncache(b int32) {
	d := p.hash[b]
	p.hashed[b] = false
	p.nHashed--
	first := p.cached[d]
	if first == b {
		if p.chain[b] < 0 {
			delete(p.cached, d)
		} else {
			p.cached[d] = p.chain[b]
		}
		return
	}
	for x := first; x >= 0; x = p.chain[x] {
		if p.chain[x] == b {
			p.chain[x] = p.chain[b]
			return
		}
	}
}

// reset drops every hash if no block is in use, as BlockPool.reset_prefix_cache.
func (p *blockPool) reset() bool {
	if p.free != p.usable {
		return false
	}
	clear(p.cached)
	clear(p.hashed)
	p.nHashed = 0
	return true
}

// gkey names a group's block in the pool: the group_idx of its KV-cache
// group and its digest.
type gkey struct {
	group int
	d     Digest
}

// numCachedBlocks counts blocks that carry a hash (in use or free), of
// every group.
func (p *blockPool) numCachedBlocks() int { return p.nHashed }
