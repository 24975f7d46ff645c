package main

import (
	"crypto/sha256"
	"sync"
	"time"
)

// authKey is an HMAC-SHA256 of a bearer token (with the verb and path of
// the decision, for allowances and forbidden callers): the cache never
// holds a token.
type authKey [sha256.Size]byte

// authEntry is a cached decision, when it expires, and its neighbours in
// its class's queue.
type authEntry struct {
	key        authKey
	decision   authDecision
	expires    time.Time
	prev, next *authEntry
}

// authQueue is a doubly linked list of entries, oldest first. All the
// entries of one queue share one TTL, so the oldest is the first to
// expire.
type authQueue struct{ head, tail *authEntry }

func (q *authQueue) push(e *authEntry) {
	e.prev, e.next = q.tail, nil
	if q.tail != nil {
		q.tail.next = e
	} else {
		q.head = e
	}
	q.tail = e
}

func (q *authQueue) remove(e *authEntry) {
	if e.prev != nil {
		e.prev.next = e.next
	} else {
		q.head = e.next
	}
	if e.next != nil {
		e.next.prev = e.prev
	} else {
		q.tail = e.prev
	}
	e.prev, e.next = nil, nil
}

// authCache holds the metrics port's auth decisions for their TTL in at
// most max entries of a fixed size (about 150 bytes each with the map's
// own overhead). When it is full of live entries, a new decision evicts
// the oldest denial, so that a caller sending a stream of unknown tokens
// cannot push the scrapers' allowances out; a new allowance with no
// denial left evicts the oldest allowance, and a new denial with none is
// not kept.
type authCache struct {
	max     int
	mu      sync.Mutex
	entries map[authKey]*authEntry
	allowed authQueue // authAllowed entries
	denied  authQueue // authForbidden and authUnauthenticated entries
}

// newAuthCache returns an empty cache of at most max entries.
func newAuthCache(max int) *authCache {
	return &authCache{max: max, entries: make(map[authKey]*authEntry)}
}

// queue is the queue of entries deciding d.
func (c *authCache) queue(d authDecision) *authQueue {
	if d == authAllowed {
		return &c.allowed
	}
	return &c.denied
}

// drop removes e from the cache.
func (c *authCache) drop(e *authEntry) {
	c.queue(e.decision).remove(e)
	delete(c.entries, e.key)
}

// get returns the live decision cached under key at now, dropping an
// expired one.
func (c *authCache) get(key authKey, now time.Time) (authDecision, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[key]
	if !ok {
		return 0, false
	}
	if !now.Before(e.expires) {
		c.drop(e)
		return 0, false
	}
	return e.decision, true
}

// put caches d under key until expires, which must be now plus d's
// class's TTL. full reports that the cache held its limit of live
// entries: the oldest denial, or for an allowance with no denial cached
// the oldest allowance, was evicted, or d, a denial among allowances only,
// was not kept.
func (c *authCache) put(key authKey, d authDecision, expires, now time.Time) (full bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.entries[key]; ok {
		c.drop(old)
	}
	for _, q := range []*authQueue{&c.allowed, &c.denied} {
		for q.head != nil && !now.Before(q.head.expires) {
			c.drop(q.head)
		}
	}
	if len(c.entries) >= c.max {
		full = true
		switch {
		case c.denied.head != nil:
			c.drop(c.denied.head)
		case d == authAllowed:
			c.drop(c.allowed.head)
		default:
			return full
		}
	}
	e := &authEntry{key: key, decision: d, expires: expires}
	c.entries[key] = e
	c.queue(d).push(e)
	return full
}

// len is the number of entries cached, live or not yet dropped.
func (c *authCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}
