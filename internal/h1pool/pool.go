package h1pool

import (
	"context"
	"slices"
	"time"
)

// get returns an idle connection to key that the server has not closed (a
// warmed one first, see warm.go), or a new one. At Config.MaxConnsPerHost
// it waits for a connection given back or closed. When the host has fewer
// open connections than the peak of requests in flight, it starts the
// host's warmer (Config.WarmAhead). A request that finds none while the
// warmer is dialing, and no other request waits for that dial, waits for it
// instead of dialing one more.
func (t *Transport) get(ctx context.Context, key string) (*conn, error) {
	now := t.clk.Now()
	for {
		t.mu.Lock()
		t.lastUse[key] = now // keeps the host warm (keepLocked)
		if len(t.forgotten) > 0 {
			delete(t.forgotten, key) // a request ends Retain's mark
		}
		pc := t.takeLocked(key, now)
		expired := pc != nil && t.expiredLocked(pc, now)
		if pc == nil {
			if wd := t.warmDial[key]; wd != nil && !wd.claimed {
				wd.claimed = true
				t.mu.Unlock()
				select {
				case <-wd.done:
					continue
				case <-ctx.Done():
					return nil, context.Cause(ctx)
				}
			}
			if limit := t.cfg.MaxConnsPerHost; limit <= 0 || t.open[key] < limit {
				t.open[key]++ // counted before the dial, so that a warmer does not dial it too
				t.warmLocked(key, now)
				t.mu.Unlock()
				return t.dialFor(ctx, key)
			}
			w := make(chan *conn, 1)
			t.waiting[key] = append(t.waiting[key], w)
			t.mu.Unlock()
			var err error
			if pc, err = t.await(ctx, key, w); err != nil {
				return nil, err
			}
			if pc == nil {
				return t.dialFor(ctx, key) // a closed connection's place, counted in open for us
			}
		} else {
			t.warmLocked(key, now) // below the peak: the next requests would dial
			t.mu.Unlock()
		}
		if !expired {
			if !pc.peek.peerClosed() {
				pc.reused = true
				return pc, nil
			}
			t.mu.Lock()
			t.peerClosedAt[key] = now
			t.mu.Unlock()
			t.drop(pc, CloseAsked)
			continue
		}
		t.drop(pc, CloseIdle)
	}
}

// dialFor dials a connection for a request, which waits for it; key's open
// count already holds it.
func (t *Transport) dialFor(ctx context.Context, key string) (*conn, error) {
	t.waited.Add(1)
	pc, err := t.dial(ctx, key)
	t.mu.Lock()
	defer t.mu.Unlock()
	if err != nil {
		t.closedLocked(key)
		return nil, err
	}
	t.countDialLocked(key, true)
	return pc, nil
}

// await waits on w, queued in t.waiting[key], for a connection given back
// (pc) or the place of one closed (nil: the caller dials, already counted
// in open). When ctx ends first, a connection or place handed over
// meanwhile is passed on.
func (t *Transport) await(ctx context.Context, key string, w chan *conn) (*conn, error) {
	select {
	case pc := <-w:
		return pc, nil
	case <-ctx.Done():
	}
	t.mu.Lock()
	q := t.waiting[key]
	if i := slices.Index(q, w); i >= 0 {
		t.setWaitingLocked(key, slices.Delete(q, i, i+1))
		t.mu.Unlock()
		return nil, context.Cause(ctx)
	}
	t.mu.Unlock()
	if pc := <-w; pc != nil { // handed over as ctx ended
		t.put(pc, false)
	} else {
		t.mu.Lock()
		t.closedLocked(key)
		t.mu.Unlock()
	}
	return nil, context.Cause(ctx)
}

// setWaitingLocked stores key's queue of waiting requests, deleting it when
// empty. t.mu is held.
func (t *Transport) setWaitingLocked(key string, q []chan *conn) {
	if len(q) == 0 {
		delete(t.waiting, key)
		return
	}
	t.waiting[key] = q
}

// popWaiterLocked removes and returns key's longest-waiting request, or nil.
// t.mu is held.
func (t *Transport) popWaiterLocked(key string) chan *conn {
	q := t.waiting[key]
	if len(q) == 0 {
		return nil
	}
	w := q[0]
	q[0] = nil
	t.setWaitingLocked(key, q[1:])
	return w
}

// takeLocked takes key's oldest warmed connection that has carried no
// request yet, else its most recently used idle one (its least recently
// used one when that has been idle for rotateAfter and the warmer keeps
// every connection the host has, see warm.go), else returns nil. t.mu is
// held.
func (t *Transport) takeLocked(key string, now time.Time) *conn {
	if f := t.fresh[key]; len(f) > 0 {
		pc := f[0]
		f[0] = nil
		if len(f) == 1 {
			delete(t.fresh, key) // the next warmed one starts a new slice
		} else {
			t.fresh[key] = f[1:]
		}
		return pc
	}
	s := t.idle[key]
	if len(s) == 0 {
		return nil
	}
	i := len(s) - 1
	if i > 0 && now.Sub(s[0].idleSince) >= rotateAfter && t.open[key] <= t.keepLocked(key, now) {
		i = 0 // the bottom of the stack, used before the server's keep-alive closes it
	}
	pc := s[i]
	copy(s[i:], s[i+1:])
	s[len(s)-1] = nil
	t.idle[key] = s[:len(s)-1]
	return pc
}

// put gives pc to the longest-waiting request for its host, or returns it
// to the pool (to fresh when warmed is true: a warmer dialed it and it has
// carried no request), or closes it when the host's pool is full or the
// Transport is closed.
// Connections idle past Config.IdleTimeout at the bottom of the stack or
// the head of fresh are closed on the way, but for those the host's warmer
// keeps (see keepLocked).
func (t *Transport) put(pc *conn, warmed bool) {
	now := t.clk.Now()
	pc.idleSince = now
	var stale []*conn
	t.mu.Lock()
	if w := t.popWaiterLocked(pc.key); w != nil {
		t.mu.Unlock()
		w <- pc // buffered: never blocks
		return
	}
	s, f := t.idle[pc.key], t.fresh[pc.key]
	if t.staleHead(s, now) || t.staleHead(f, now) {
		excess := t.open[pc.key] - t.keepLocked(pc.key, now) // how many the idle timeout may close
		s, stale = t.pruneStale(s, now, stale, &excess)
		f, stale = t.pruneStale(f, now, stale, &excess)
	}
	// After Close nothing is kept, nor a connection to a host Retain left
	// out.
	full := len(s)+len(f) >= t.cfg.MaxIdlePerHost || t.stopped || t.forgotten[pc.key]
	if !full && warmed {
		f = append(f, pc)
	} else if !full {
		s = append(s, pc)
	}
	t.idle[pc.key] = s
	if len(f) > 0 {
		t.fresh[pc.key] = f
	} else {
		delete(t.fresh, pc.key)
	}
	t.armSweepLocked()
	t.mu.Unlock()
	for _, c := range stale {
		t.drop(c, CloseIdle)
	}
	if full {
		t.drop(pc, CloseIdle)
	}
}

// staleHead reports whether the oldest connection of s has been idle for
// Config.IdleTimeout: put looks no further (nor at what the warmer keeps)
// otherwise.
func (t *Transport) staleHead(s []*conn, now time.Time) bool {
	return len(s) > 0 && now.Sub(s[0].idleSince) >= t.cfg.IdleTimeout
}

// pruneStale moves the connections at the head of s (oldest first) that have
// been idle for Config.IdleTimeout to stale, at most *excess of them (which
// it lowers by as many).
func (t *Transport) pruneStale(s []*conn, now time.Time, stale []*conn, excess *int) ([]*conn, []*conn) {
	i := 0
	for i < len(s) && i < *excess && now.Sub(s[i].idleSince) >= t.cfg.IdleTimeout {
		i++
	}
	*excess -= i
	if i == 0 {
		return s, stale
	}
	stale = append(stale, s[:i]...)
	n := copy(s, s[i:])
	clear(s[n:])
	return s[:n], stale
}

// expiredLocked reports whether pc, just taken from the pool, is to be
// closed for idleness: idle for Config.IdleTimeout, and its host has more
// connections open than the warmer keeps. t.mu is held.
func (t *Transport) expiredLocked(pc *conn, now time.Time) bool {
	return now.Sub(pc.idleSince) >= t.cfg.IdleTimeout && t.open[pc.key] > t.keepLocked(pc.key, now)
}

// drop closes pc, which leaves the count of its host's open connections.
func (t *Transport) drop(pc *conn, why CloseReason) {
	if pc.dropped.Swap(true) {
		return
	}
	_ = pc.c.Close()
	t.mu.Lock()
	t.closedLocked(pc.key)
	t.mu.Unlock()
	t.closes[why].Add(1) // after the open count: a caller told of the close sees it gone
	if f := t.cfg.OnClose; f != nil {
		f(why)
	}
}

// closedLocked counts one connection to key less (closed, or a dial that
// failed) and hands its place to the longest-waiting request, if any; the
// host's entries go once it has none, so that hosts gone from use leave
// nothing behind: all but its peer-closed mark, which is to outlive the
// connection whose close it records (for Config.IdleTimeout) and goes by
// the sweep once that old, or by Retain. t.mu is held.
func (t *Transport) closedLocked(key string) {
	if w := t.popWaiterLocked(key); w != nil {
		w <- nil // the place stays counted in open, for the waiter's dial
		return
	}
	if t.open[key]--; t.open[key] <= 0 {
		delete(t.open, key)
		delete(t.dialed, key)
		delete(t.lastUse, key)
		delete(t.forgotten, key)
	}
}
