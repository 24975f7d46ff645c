package render

import (
	"context"
	"math"
	"sync"
	"time"

	"github.com/kvroute/kvroute/telemetry"
)

// gate is one render endpoint's concurrency limit with a first-come,
// first-served queue bounded in time: at most limit renders hold a slot,
// and a render that finds none waits up to the queue wait for one, on the
// Client's clock. A limit of 0 admits everything (the gate then only
// counts what is in flight, for Capacity and the metrics).
type gate struct {
	limit int

	mu       sync.Mutex
	inFlight int
	waiters  []*gateWaiter // FIFO; a waiter that gave up is removed
}

// gateWaiter is one render waiting for a slot. granted is closed when a
// release hands it the slot (under the gate's lock, with ok set).
type gateWaiter struct {
	granted chan struct{}
	ok      bool
}

// queueOutcome is how a wait for a slot ended.
type queueOutcome uint8

const (
	queueGranted  queueOutcome = iota // a slot was taken, at once or after waiting
	queueTimedOut                     // no slot within the queue wait
	queueNoWait                       // no slot free and the queue wait is 0
	queueCtxDone                      // the render's budget or the caller's context ended first
)

// tryAcquire takes a slot if one is free, without waiting.
func (g *gate) tryAcquire() bool { return g.tryAcquireBelow(math.MaxInt) }

// tryAcquireBelow takes a slot if one is free and fewer than below renders
// are in flight, without waiting.
func (g *gate) tryAcquireBelow(below int) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.inFlight >= below || g.limit > 0 && (g.inFlight >= g.limit || len(g.waiters) > 0) {
		return false
	}
	g.inFlight++
	return true
}

// acquire takes a slot, waiting up to wait (on clk) behind the renders
// already queued.
func (g *gate) acquire(ctx context.Context, clk telemetry.Clock, wait time.Duration) queueOutcome {
	g.mu.Lock()
	if g.limit == 0 || (g.inFlight < g.limit && len(g.waiters) == 0) {
		g.inFlight++
		g.mu.Unlock()
		return queueGranted
	}
	if wait <= 0 {
		g.mu.Unlock()
		return queueNoWait
	}
	w := &gateWaiter{granted: make(chan struct{})}
	g.waiters = append(g.waiters, w)
	g.mu.Unlock()

	timer := clk.NewTimer(wait)
	defer timer.Stop()
	var out queueOutcome
	select {
	case <-w.granted:
		return queueGranted
	case <-timer.C():
		out = queueTimedOut
	case <-ctx.Done():
		out = queueCtxDone
	}
	g.mu.Lock()
	if w.ok {
		// Granted while the timer or the context fired: the slot is ours.
		g.mu.Unlock()
		return queueGranted
	}
	g.removeLocked(w)
	g.mu.Unlock()
	return out
}

// release frees a slot, handing it to the oldest waiter if there is one.
func (g *gate) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.waiters) > 0 {
		w := g.waiters[0]
		g.waiters[0] = nil
		g.waiters = g.waiters[1:]
		w.ok = true
		close(w.granted)
		return // the slot passes to w: inFlight is unchanged
	}
	g.inFlight--
}

func (g *gate) removeLocked(w *gateWaiter) {
	for i, x := range g.waiters {
		if x == w {
			g.waiters = append(g.waiters[:i], g.waiters[i+1:]...)
			return
		}
	}
}

// load returns the renders in flight and waiting.
func (g *gate) load() (inFlight, queued int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.inFlight, len(g.waiters)
}
