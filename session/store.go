package session

import (
	"sync"
)

// storeShards is the most shards the store spreads its lock over; a power
// of two.
const storeShards = 16

// minShardEntries is the fewest entries a shard holds when the store has
// more than one: a store of MaxEntries below storeShards × minShardEntries
// has fewer shards (one below 2 × minShardEntries), so that the shards'
// uneven filling, which makes eviction only approximately least recent
// first, stays small against each shard's size.
const minShardEntries = 1024

// maxInterned bounds the endpoint names the store interns for sessions
// learned from peers (a replica accepts only its own endpoints' names, so
// this is far above any fleet).
const maxInterned = 1 << 14

// entry is one session: the endpoint that served its last turn and when.
// prev and next link the shard's entries by that time, from the latest
// (head) to the earliest (tail): the order they expire in, and the
// eviction order.
type entry struct {
	key        uint64
	endpoint   string
	at         int64 // nanoseconds since the Affinity's base time of the last record
	prev, next int32
}

// shard is one part of the store: a map from key to slot in a slab of
// entries, with a free list and the list by time (see entry). Its mutex guards all of
// it; readers take it shared.
type shard struct {
	mu         sync.RWMutex
	idx        map[uint64]int32
	ents       []entry
	free       int32 // head of the free list (linked through next), -1 when empty
	head, tail int32 // latest and earliest routed, -1 when empty
	cap        int
}

// store is the bounded TTL map from session key (a hash) to endpoint. Its
// shards split the bound (their caps sum to it exactly) and each evicts its
// own least recently routed entry. It starts no goroutine: expired
// entries leave when looked up, or from the tail when a record needs room.
// Safe for concurrent use.
type store struct {
	shards [storeShards]shard
	mask   uint64 // the shards in use, a power of two, minus one
	ttl    int64  // nanoseconds

	internMu sync.RWMutex
	interned map[string]string
}

// lookupState is what a lookup found.
type lookupState uint8

const (
	found lookupState = iota
	absent
	expired
)

func newStore(maxEntries int, ttlNanos int64) *store {
	maxEntries = max(1, maxEntries)
	n := 1
	for n < storeShards && maxEntries/(2*n) >= minShardEntries {
		n *= 2
	}
	s := &store{mask: uint64(n - 1), ttl: ttlNanos, interned: make(map[string]string)}
	for i := range s.shards[:n] {
		sh := &s.shards[i]
		sh.idx, sh.free, sh.head, sh.tail = make(map[uint64]int32), -1, -1, -1
		sh.cap = maxEntries / n
		if i < maxEntries%n {
			sh.cap++
		}
	}
	return s
}

func (s *store) shard(key uint64) *shard { return &s.shards[key&s.mask] } // keys are hashes

// peek returns the endpoint recorded for key, if any and not expired at
// now, without changing anything: the scorer's read. It does not allocate.
func (s *store) peek(key uint64, now int64) (string, bool) {
	sh := s.shard(key)
	sh.mu.RLock()
	i, ok := sh.idx[key]
	var ep string
	if ok {
		e := &sh.ents[i]
		ok = now-e.at <= s.ttl
		ep = e.endpoint
	}
	sh.mu.RUnlock()
	return ep, ok
}

// lookup is peek that also removes an expired entry and says whether it
// found one, found none or found an expired one.
func (s *store) lookup(key uint64, now int64) (string, lookupState) {
	if ep, ok := s.peek(key, now); ok {
		return ep, found
	}
	sh := s.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	i, ok := sh.idx[key]
	if !ok {
		return "", absent
	}
	if e := &sh.ents[i]; now-e.at <= s.ttl { // recorded meanwhile
		return e.endpoint, found
	}
	sh.remove(i)
	return "", expired
}

// record sets key's endpoint as of now and reports how many entries it
// expired and evicted to make room, and whether it stored the record. A
// peer's record older than the one stored (a delayed message) is ignored
// (stored false); a local one (peer false) is the
// session's latest turn and always replaces it, even on a clock without a
// monotonic reading that stepped back.
func (s *store) record(key uint64, endpoint string, now int64, peer bool) (expiredN, evictedN int, stored bool) {
	sh := s.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if i, ok := sh.idx[key]; ok {
		e := &sh.ents[i]
		if peer && now < e.at {
			return 0, 0, false
		}
		e.endpoint, e.at = endpoint, now
		sh.unlink(i)
		sh.insert(i)
		return 0, 0, true
	}
	for sh.tail >= 0 && now-sh.ents[sh.tail].at > s.ttl { // expired sessions go first
		sh.remove(sh.tail)
		expiredN++
	}
	if len(sh.idx) >= sh.cap {
		sh.remove(sh.tail)
		evictedN++
	}
	var i int32
	if sh.free >= 0 {
		i = sh.free
		sh.free = sh.ents[i].next
	} else {
		sh.ents = append(sh.ents, entry{})
		i = int32(len(sh.ents) - 1)
	}
	sh.ents[i] = entry{key: key, endpoint: endpoint, at: now}
	sh.idx[key] = i
	sh.insert(i)
	return expiredN, evictedN, true
}

// len returns the number of stored sessions, expired ones not yet removed
// included.
func (s *store) len() int {
	n := 0
	for i := range s.shards[:s.mask+1] {
		sh := &s.shards[i]
		sh.mu.RLock()
		n += len(sh.idx)
		sh.mu.RUnlock()
	}
	return n
}

// intern returns a string equal to b, the same one for every call with the
// same bytes, so that sessions learned from peers share their endpoint's
// name. It allocates only for a name not seen before.
func (s *store) intern(b []byte) string {
	s.internMu.RLock()
	v, ok := s.interned[string(b)]
	s.internMu.RUnlock()
	if ok {
		return v
	}
	v = string(b)
	s.internMu.Lock()
	if len(s.interned) < maxInterned {
		s.interned[v] = v
	}
	s.internMu.Unlock()
	return v
}

// insert links slot i into the list at its time's place (see entry), so
// that the tail is always the first entry to expire: expiry from the tail
// then stops only at a live entry, with none expired ahead of it, and
// eviction forgets the least recently routed. A local turn, the latest,
// goes to the head after one comparison; a peer's record, as of its turn,
// is usually among the latest (its age is the publishing delay) and is
// placed by walking from the end nearer to it in time.
func (sh *shard) insert(i int32) {
	at := sh.ents[i].at
	if sh.head < 0 || at >= sh.ents[sh.head].at {
		sh.link(i, -1, sh.head)
		return
	}
	if at <= sh.ents[sh.tail].at {
		sh.link(i, sh.tail, -1)
		return
	}
	// Here head.at > at > tail.at: both walks end within the list.
	if sh.ents[sh.head].at-at <= at-sh.ents[sh.tail].at {
		j := sh.head
		for sh.ents[j].at > at {
			j = sh.ents[j].next
		}
		sh.link(i, sh.ents[j].prev, j)
		return
	}
	j := sh.tail
	for sh.ents[j].at < at {
		j = sh.ents[j].prev
	}
	sh.link(i, j, sh.ents[j].next)
}

// link puts slot i between prev and next, adjacent slots of the list (-1:
// the head's or the tail's side).
func (sh *shard) link(i, prev, next int32) {
	e := &sh.ents[i]
	e.prev, e.next = prev, next
	if prev >= 0 {
		sh.ents[prev].next = i
	} else {
		sh.head = i
	}
	if next >= 0 {
		sh.ents[next].prev = i
	} else {
		sh.tail = i
	}
}

func (sh *shard) unlink(i int32) {
	e := &sh.ents[i]
	if e.prev >= 0 {
		sh.ents[e.prev].next = e.next
	} else {
		sh.head = e.next
	}
	if e.next >= 0 {
		sh.ents[e.next].prev = e.prev
	} else {
		sh.tail = e.prev
	}
}

// remove drops slot i: out of the map and the list, onto the free list.
func (sh *shard) remove(i int32) {
	sh.unlink(i)
	e := &sh.ents[i]
	delete(sh.idx, e.key)
	*e = entry{next: sh.free}
	sh.free = i
}
