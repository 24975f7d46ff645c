package main

import (
	"container/list"
	"crypto/sha256"
	"sync"
	"time"
)

// authKey is an HMAC-SHA256 of a bearer token (with the verb and path of
// the decision, for allowances and forbidden callers): the cache never
// holds a token.
type authKey [sha256.Size]byte

// authEntry is a cached decision and when it expires; it is the value of
// an element of its class's queue.
type authEntry struct {
	key      authKey
	decision authDecision
	expires  time.Time
}

// authCache holds the metrics port's auth decisions for their TTL in at
// most max entries of a fixed size (about 170 bytes each with the list's and the map's
// own overhead). When it is full of live entries, a new decision evicts
// the oldest denial, so that a caller sending a stream of unknown tokens
// cannot push the scrapers' allowances out; a new allowance with no
// denial left evicts the oldest allowance, and a new denial with none is
// not kept.
//
// Each class's entries are a queue, oldest first: they share one TTL, so
// the oldest is the first to expire.
type authCache struct {
	max     int
	mu      sync.Mutex
	entries map[authKey]*list.Element // of allowed or denied, an *authEntry
	allowed list.List                 // authAllowed entries
	denied  list.List                 // authForbidden and authUnauthenticated entries
}

// newAuthCache returns an empty cache of at most max entries.
func newAuthCache(max int) *authCache {
	return &authCache{max: max, entries: make(map[authKey]*list.Element)}
}

// queue is the queue of entries deciding d.
func (c *authCache) queue(d authDecision) *list.List {
	if d == authAllowed {
		return &c.allowed
	}
	return &c.denied
}

// drop removes el, an element of one of the queues, from the cache.
func (c *authCache) drop(el *list.Element) {
	e := el.Value.(*authEntry)
	c.queue(e.decision).Remove(el)
	delete(c.entries, e.key)
}

// get returns the live decision cached under key at now, dropping an
// expired one.
func (c *authCache) get(key authKey, now time.Time) (authDecision, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.entries[key]
	if !ok {
		return 0, false
	}
	e := el.Value.(*authEntry)
	if !now.Before(e.expires) {
		c.drop(el)
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
	for _, q := range []*list.List{&c.allowed, &c.denied} {
		for el := q.Front(); el != nil && !now.Before(el.Value.(*authEntry).expires); el = q.Front() {
			c.drop(el)
		}
	}
	if len(c.entries) >= c.max {
		full = true
		switch {
		case c.denied.Len() > 0:
			c.drop(c.denied.Front())
		case d == authAllowed:
			c.drop(c.allowed.Front())
		default:
			return full
		}
	}
	c.entries[key] = c.queue(d).PushBack(&authEntry{key: key, decision: d, expires: expires})
	return full
}

// len is the number of entries cached, live or not yet dropped.
func (c *authCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}
