package admission

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// A large request pushes sheddable requests out of a full queue oldest
// first, and finds them with one sort of their band rather than a scan of
// the band per request pushed out: under the Controller's lock, a request
// near the body limit arriving at a queue of many small sheddable ones
// would otherwise cost their number squared (tens of milliseconds at the
// defaults, seconds at a larger maxQueuedRequests).
func TestPushingOutManyLooksAtEachQueuedRequestOnce(t *testing.T) {
	const queued, each = 1000, 100 // estimated bytes of tokensReq(25)
	f := newFixture(t, Config{MaxQueuedBytes: queued * each, QueueTimeout: time.Hour, Objectives: gateObjectives})
	f.det.set("a:1", true)
	c := f.c
	batch := c.objectives["batch"].band
	victims := make([]*waiter, queued)
	c.mu.Lock()
	for i := range victims {
		c.seq++
		w := &waiter{eps: oneEP, idx: -1, cost: 25, bytes: each, done: make(chan error, 1), ctx: context.Background(),
			seq: c.seq, enqueued: t0, deadline: t0.Add(time.Hour)}
		batch.push(w, fmt.Sprint("tenant-", i%10), false, false)
		c.queued.Add(1)
		c.bytes += w.bytes
		victims[i] = w
	}
	c.aged = 0
	c.mu.Unlock()

	out := make(chan result, 1)
	f.admit(t, ctxFor("chat", ""), "large", tokensReq(queued*each/2/4), oneEP, out) // half the bound
	c.mu.Lock()
	aged := c.aged
	c.mu.Unlock()
	for i, w := range victims {
		select {
		case err := <-w.done:
			if i >= queued/2 || !errors.Is(err, ErrShed) {
				t.Fatalf("request %d (of %d, oldest first) left with %v", i, queued, err)
			}
		default:
			if i < queued/2 {
				t.Fatalf("request %d (of %d, oldest first) still queued: the oldest half goes", i, queued)
			}
		}
	}
	if aged > 2*queued {
		t.Fatalf("looked at %d queued requests to push out %d of %d, want at most %d", aged, queued/2, queued, 2*queued)
	}
}
