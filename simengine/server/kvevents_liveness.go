package server

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvroute/kvroute/kvevents/wire"
	"github.com/kvroute/kvroute/simengine"
	"github.com/kvroute/kvroute/telemetry"
)

// HeartbeatEvery is how long a publisher with a snapshot_endpoint stays
// silent before it publishes an empty batch, as vLLM's publisher thread
// does (it looks every 100 ms whether a second has passed since its last
// send).
const HeartbeatEvery = time.Second

// liveness is the publisher identity and idle heartbeats of vLLM's snapshot
// revision of the publisher (vllm-project/vllm#57789), which the simulated
// engine follows when it serves snapshots (vLLM draws the identity, and
// sends heartbeats, only then):
//
//   - identity: 16 random bytes (vLLM: uuid4().bytes) drawn when the
//     publisher starts and never changed: a new simulated engine (a
//     restart) has a new one. Every batch carries it as the array batch's
//     fourth element, after data_parallel_rank (the map-shaped batch: key
//     "publisher_id"), where vLLM's example snapshot subscriber reads it;
//     the snapshot replies carry the same identity.
//   - heartbeats: when nothing was published for HeartbeatEvery, an empty
//     batch (ts, no events, data_parallel_rank 0, the identity). Like
//     vLLM's, it takes the next sequence number, is buffered for replay and
//     is recorded by the snapshot recorder (so a snapshot taken after it
//     reports its sequence): a subscriber sees no gap around it.
//
// The heartbeat goroutine owns the timer; the time of the last send is
// guarded by EventPublisher.mu.
type liveness struct {
	p     *EventPublisher
	id    [16]byte
	clock telemetry.Clock
	last  time.Time // guarded by p.mu: when the last batch was published
	hb    wire.Batch
	beats atomic.Uint64
	stop  chan struct{}
	done  chan struct{}
	once  sync.Once
}

// startLiveness starts the heartbeats of p under identity id on clock
// (nil: the wall clock).
func startLiveness(p *EventPublisher, id [16]byte, clock telemetry.Clock) *liveness {
	if clock == nil {
		clock = telemetry.Wall
	}
	l := &liveness{p: p, id: id, clock: clock, stop: make(chan struct{}), done: make(chan struct{})}
	l.last = clock.Now()
	t := clock.NewTimer(HeartbeatEvery) // armed before New returns: a test's clock can move at once
	go l.run(t)
	return l
}

// sent notes a published batch (p.mu held).
func (l *liveness) sent() { l.last = l.clock.Now() }

// run sends a heartbeat whenever the timer finds the publisher idle for
// HeartbeatEvery, and otherwise waits for the rest of the interval.
func (l *liveness) run(t telemetry.Timer) {
	defer close(l.done)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C():
		}
		l.beat(t)
	}
}

// beat re-arms t and, when the publisher has been idle for HeartbeatEvery,
// publishes a heartbeat. The timer is re-armed before the heartbeat goes
// out, so whoever sees the heartbeat arrive can move a test clock on.
func (l *liveness) beat(t telemetry.Timer) {
	p := l.p
	p.mu.Lock()
	defer p.mu.Unlock()
	now := l.clock.Now()
	if idle := now.Sub(l.last); idle < HeartbeatEvery {
		t.Reset(HeartbeatEvery - idle)
		return
	}
	t.Reset(HeartbeatEvery)
	l.hb.Reset()
	l.hb.TS = float64(now.UnixNano()) / 1e9
	l.hb.DPRank, l.hb.HasDPRank = 0, true
	p.publishLocked(&l.hb, simengine.EventBatch{Time: now})
	l.beats.Add(1)
}

// close stops the heartbeats and waits for the goroutine.
func (l *liveness) close() {
	l.once.Do(func() { close(l.stop) })
	<-l.done
}

// PublisherID is the identity every batch carries (vLLM's publisher_id);
// ok is false without a snapshot_endpoint, where vLLM sends none.
func (p *EventPublisher) PublisherID() (id [16]byte, ok bool) {
	if p.live == nil {
		return id, false
	}
	return p.live.id, true
}

// Heartbeats counts the empty batches the idle publisher sent.
func (p *EventPublisher) Heartbeats() uint64 {
	if p.live == nil {
		return 0
	}
	return p.live.beats.Load()
}
