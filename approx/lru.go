package approx

import (
	"sync"

	"github.com/kvroute/kvroute/kvindex"
)

// slotBytes is what one slot of an endpoint's LRU is accounted: its node (a
// 24-byte array element) and its share of the key → slot map (under 40
// bytes per entry at the map's lowest load factor). Accounting is per slot
// allocated (the node array's capacity), not per live entry, so the bound
// holds for what the Go heap keeps; TestAccountedBytesCoverHeap checks it.
const slotBytes = 64

// none is the nil link of the LRU list.
const none = -1

// node is one block an endpoint is believed to hold: its key, when a
// decision last routed it there (index clock, unix ns), and the LRU links
// (slot indexes; most recently routed at the head).
type node struct {
	key        kvindex.Key
	at         int64
	prev, next int32
}

// lru is one endpoint's approximate entries: a map from block key to slot
// and a doubly linked list through the slot array, most recently routed
// first. Its lock guards everything; slots is also read without it (the
// index's memory bound picks the largest endpoint).
type lru struct {
	mu         sync.RWMutex
	pos        map[kvindex.Key]int32
	nodes      []node
	head, tail int32
	free       int32 // free-slot list through next
	n          int   // live entries
	// expired is set when the mode refresh dropped the lru for being empty
	// (Index.dropExpired): a Record that held it then files its keys in
	// the endpoint's new lru instead.
	expired bool
}

func newLRU() *lru {
	return &lru{pos: map[kvindex.Key]int32{}, head: none, tail: none, free: none}
}

// slots is the accounted size: the node array's capacity.
func (l *lru) slots() int { return cap(l.nodes) }

func (l *lru) unlink(i int32) {
	nd := &l.nodes[i]
	if nd.prev != none {
		l.nodes[nd.prev].next = nd.next
	} else {
		l.head = nd.next
	}
	if nd.next != none {
		l.nodes[nd.next].prev = nd.prev
	} else {
		l.tail = nd.prev
	}
}

func (l *lru) pushFront(i int32) {
	nd := &l.nodes[i]
	nd.prev, nd.next = none, l.head
	if l.head != none {
		l.nodes[l.head].prev = i
	}
	l.head = i
	if l.tail == none {
		l.tail = i
	}
}

// touch makes key the most recently routed entry at time at; limit bounds
// the live entries (the least recently routed one makes room) and the slot
// array. It returns whether an entry was evicted to make room.
func (l *lru) touch(key kvindex.Key, at int64, limit int) (evicted bool) {
	if i, ok := l.pos[key]; ok {
		l.unlink(i)
		l.nodes[i].at = at
		l.pushFront(i)
		return false
	}
	if l.n >= limit && l.tail != none {
		l.evictTail()
		evicted = true
	}
	var i int32
	switch {
	case l.free != none:
		i = l.free
		l.free = l.nodes[i].next
	default:
		if len(l.nodes) == cap(l.nodes) {
			// Grow by hand so the array's capacity never passes the limit:
			// the accounted bytes are the capacity.
			c := min(max(2*cap(l.nodes), 16), max(limit, 1))
			if c <= len(l.nodes) {
				c = len(l.nodes) + 1
			}
			nn := make([]node, len(l.nodes), c)
			copy(nn, l.nodes)
			l.nodes = nn
		}
		l.nodes = l.nodes[:len(l.nodes)+1]
		i = int32(len(l.nodes) - 1)
	}
	l.nodes[i] = node{key: key, at: at}
	l.pushFront(i)
	l.pos[key] = i
	l.n++
	return evicted
}

// evictTail removes the least recently routed entry.
func (l *lru) evictTail() {
	i := l.tail
	if i == none {
		return
	}
	l.unlink(i)
	delete(l.pos, l.nodes[i].key)
	l.nodes[i].next = l.free
	l.free = i
	l.n--
}

// expire removes the entries routed at or before cutoff (from the tail:
// the list is in routing order) and returns how many.
func (l *lru) expire(cutoff int64) int {
	k := 0
	for l.tail != none && l.nodes[l.tail].at <= cutoff {
		l.evictTail()
		k++
	}
	return k
}

// shrink evicts down to limit entries and, when the slot array is larger
// than limit, rebuilds it (and the map) at the live size so the memory is
// released. It returns the entries evicted.
func (l *lru) shrink(limit int) int {
	k := 0
	for l.n > limit {
		l.evictTail()
		k++
	}
	if cap(l.nodes) > max(limit, 1) {
		l.compact()
	}
	return k
}

// compact rebuilds the slot array and the map with exactly the live
// entries, in LRU order.
func (l *lru) compact() {
	nodes := make([]node, 0, l.n)
	pos := make(map[kvindex.Key]int32, l.n)
	for i := l.head; i != none; i = l.nodes[i].next {
		nd := l.nodes[i]
		j := int32(len(nodes))
		nodes = append(nodes, node{key: nd.key, at: nd.at, prev: j - 1, next: j + 1})
		pos[nd.key] = j
	}
	if len(nodes) > 0 {
		nodes[0].prev, nodes[len(nodes)-1].next = none, none
		l.head, l.tail = 0, int32(len(nodes)-1)
	} else {
		l.head, l.tail = none, none
	}
	l.nodes, l.pos, l.free = nodes, pos, none
}

// match is the number of leading keys held and routed after cutoff.
//
// An endpoint's entries are prefix-closed: a block key names its whole
// prefix (keys chain their parents), so every Record that routed a block
// routed its prefix too, touching the prefix's blocks after it (Record
// walks a prompt backwards); the prefix is therefore at least as recent,
// and capacity, memory and TTL evictions, which all take the least
// recently routed first, never remove a block before a deeper one of the
// same prefix. So the held prefix is found by binary search: about log2
// of the prompt's blocks map lookups instead of one per block.
func (l *lru) match(keys []kvindex.Key, cutoff int64) int {
	lo, hi := 0, len(keys) // keys[:lo] held; keys[hi:] not
	for lo < hi {
		mid := int(uint(lo+hi+1) >> 1)
		if i, ok := l.pos[keys[mid-1]]; ok && l.nodes[i].at > cutoff {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return lo
}
