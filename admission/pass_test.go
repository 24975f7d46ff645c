package admission

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/kvroute/kvroute"
)

// A dispatch pass over a queue whose every wanted endpoint is busy stops
// looking once it has found them so: fairness IDs come from clients, so a
// full queue may hold as many flows as requests, and each arrival and
// each Notify runs a pass under the Controller's lock. Looking at every
// flow's candidates (and, for each, at the endpoints already found busy)
// made a pass over 10,000 flows of 64 candidates take tens of
// milliseconds, so that the admission stalled the gateway under the
// overload it is there to absorb.
func TestDispatchPassStopsOnceEveryWantedEndpointIsBusy(t *testing.T) {
	f := newFixture(t, Config{QueueTimeout: time.Hour})
	eps := make([]kvroute.Endpoint, 64)
	for i := range eps {
		eps[i].ID = fmt.Sprintf("10.0.0.%d:8000", i)
		f.det.set(eps[i].ID, true)
	}
	c := f.c
	const flows = 1000
	c.mu.Lock()
	for i := range flows {
		c.seq++
		w := &waiter{eps: eps, idx: -1, cost: 100, bytes: 400, done: make(chan error, 1), ctx: context.Background(),
			seq: c.seq, enqueued: t0, deadline: t0.Add(time.Hour)}
		c.def.band.push(w, fmt.Sprint("tenant-", i), false, false)
		c.queued.Add(1)
		c.bytes += w.bytes
	}
	c.scanned = 0
	c.dispatchLocked()
	scanned := c.scanned
	c.mu.Unlock()
	if c.Queued() != flows {
		t.Fatalf("queued %d, want %d: nothing is free", c.Queued(), flows)
	}
	if scanned > uint64(len(eps)) {
		t.Fatalf("the pass looked at %d candidates, want at most %d (each endpoint once)", scanned, len(eps))
	}
	// Once one endpoint is free again, the next pass releases a request to it.
	f.det.set(eps[63].ID, false)
	c.Notify("")
	if c.Queued() != flows-1 {
		t.Fatalf("queued %d after a release, want %d", c.Queued(), flows-1)
	}
}
