package kvevents

import (
	"context"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvroute/kvroute/kvevents/wire"
)

// worker applies the queued messages of the endpoints assigned to it, one at
// a time, so that each endpoint's messages apply in order. Its queue is
// bounded in messages (PoolConfig.QueueSize) and in payload bytes, per
// worker (PoolConfig.QueueBytes) and per endpoint
// (PoolConfig.EndpointQueueBytes); enqueue never blocks the receiver.
//
// The byte bounds decide who loses when a peer floods large payloads: the
// endpoint that would exceed its own share is the one whose message is
// dropped (and caught up by replay), never a quiet endpoint on the
// same worker. An endpoint whose queued bytes are within its fair share of
// the worker (QueueBytes / endpoints on the worker) may still queue into a
// reserve of QueueBytes/4 above the worker bound, so a flood that fills the
// worker does not starve the light endpoints next to it. Queued payload
// bytes are thus at most 1.25 × QueueBytes per worker, or one message when
// the worker's queue is empty (a single payload is bounded by
// Limits.MaxPayloadBytes).
//
// The message bound is shared the same way, so that a flood of tiny
// payloads cannot fill the queue by count either: each endpoint on the
// worker may always queue up to its share (QueueSize / endpoints on the
// worker), and beyond it only into what is free, that is what the other
// endpoints' unused shares leave. The queue thus always keeps room for
// every endpoint's share.
type worker struct {
	q       chan item
	ctl     chan func(*wire.Decoder, *wire.Batch) // replayed batches and outcomes (stream.onWorker)
	depth   prometheus.Gauge
	qbytes  prometheus.Gauge
	shed    prometheus.Counter
	lim     wire.Limits
	maxB    int64 // per worker
	maxEpB  int64 // per endpoint
	maxN    int   // messages per worker: the queue's capacity
	streams int   // endpoints assigned; guarded by Pool.mu

	mu      sync.Mutex
	bytes   int64
	msgs    int
	inShare int                // the sum over endpoints of min(queued messages, share)
	perEp   map[*stream]queued // what each endpoint with something queued has queued
	n       int                // streams, mirrored under mu for the fair share
}

// queued is what one endpoint has queued on its worker.
type queued struct {
	bytes int64
	msgs  int
}

func newWorker(cfg *PoolConfig, m *eventMetrics) *worker {
	return &worker{
		q: make(chan item, cfg.QueueSize), ctl: make(chan func(*wire.Decoder, *wire.Batch)), depth: m.PoolQueueDepth, qbytes: m.PoolQueueBytes,
		shed: m.QueueShedBytes, lim: cfg.Limits,
		maxB: int64(cfg.QueueBytes), maxEpB: int64(cfg.EndpointQueueBytes), maxN: cfg.QueueSize,
		perEp: make(map[*stream]queued),
	}
}

// setStreams records the number of endpoints assigned (for the fair share).
func (w *worker) setStreams(n int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.n = n
	share := w.share()
	w.inShare = 0
	for _, q := range w.perEp {
		w.inShare += min(q.msgs, share)
	}
}

// share is each endpoint's share of the queue's messages. w.mu is held.
func (w *worker) share() int { return w.maxN / max(w.n, 1) }

// admit reserves a message of n payload bytes for st, or reports that the
// message must be dropped.
func (w *worker) admit(st *stream, n int64) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	ep := w.perEp[st]
	switch {
	case ep.bytes > 0 && ep.bytes+n > w.maxEpB:
		return false // over its own bound: the offender is shed
	case w.bytes == 0, w.bytes+n <= w.maxB:
	case ep.bytes+n <= w.maxB/int64(max(w.n, 1)) && w.bytes+n <= w.maxB+w.maxB/4:
		// A light endpoint next to a flood: within its fair share, it
		// uses the reserve.
	default:
		return false
	}
	share := w.share()
	if w.msgs >= w.maxN {
		return false
	}
	if ep.msgs >= share {
		// Beyond its share, an endpoint queues only into what the other
		// endpoints' unused shares leave free.
		unused := max(w.n*share-w.inShare, 0)
		if w.msgs+1+unused > w.maxN {
			return false
		}
	} else {
		w.inShare++
	}
	w.bytes += n
	w.msgs++
	w.perEp[st] = queued{bytes: ep.bytes + n, msgs: ep.msgs + 1}
	return true
}

// release returns the bytes and the message slot of a dequeued (or
// rejected) message.
func (w *worker) release(st *stream, n int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	ep := w.perEp[st]
	if ep.msgs <= w.share() {
		w.inShare--
	}
	w.bytes -= n
	w.msgs--
	if ep.msgs > 1 {
		w.perEp[st] = queued{bytes: ep.bytes - n, msgs: ep.msgs - 1}
	} else {
		delete(w.perEp, st)
	}
}

// queuedBytes returns the payload bytes queued on w.
func (w *worker) queuedBytes() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.bytes
}

// enqueue offers it to the worker; false means the queue was full (in
// messages or bytes, or the endpoint's share of them) and the message was
// not queued.
func (w *worker) enqueue(it item) bool {
	n := int64(it.size())
	if !w.admit(it.st, n) {
		w.shed.Add(float64(n))
		return false
	}
	w.depth.Inc()
	select {
	case w.q <- it:
		w.qbytes.Add(float64(n))
		return true
	default:
		w.depth.Dec()
		w.release(it.st, n)
		return false
	}
}

// dequeued accounts for a message taken off the queue.
func (w *worker) dequeued(it item) {
	n := int64(it.size())
	w.depth.Dec()
	w.qbytes.Sub(float64(n))
	w.release(it.st, n)
}

// onWorker runs f on the stream's worker goroutine, where its live messages
// are sequenced, with the worker's decoder, and waits for it: a replay
// goroutine fetches batches and hands each one, and its outcome, over. It
// reports false when ctx ended before the worker took f. The worker runs
// until the pool has closed every stream (and waited for their replays), so
// a taken f always completes.
func (st *stream) onWorker(ctx context.Context, f func(dec *wire.Decoder, b *wire.Batch)) bool {
	done := make(chan struct{})
	select {
	case st.w.ctl <- func(dec *wire.Decoder, b *wire.Batch) {
		defer close(done)
		f(dec, b)
	}:
	case <-ctx.Done():
		return false
	}
	<-done
	return true
}

// sequenced runs f with the stream locked on its worker goroutine (see
// onWorker): everything that changes what the stream has applied —
// restarts, catch-ups, connects, tail probes, repairs, Resync, replayed
// batches and replay outcomes — is sequenced there with its live
// messages. It reports false when the stream closed first.
func (st *stream) sequenced(f func()) bool {
	return st.onWorker(st.ctx, func(*wire.Decoder, *wire.Batch) {
		st.lock()
		defer st.unlock()
		f()
	})
}

// run applies messages until stop is closed. Messages still queued then are
// discarded (their endpoints are closing with the pool; those of a stream
// replaced before were counted when it was, stream.close).
func (w *worker) run(stop <-chan struct{}) {
	dec := wire.NewDecoder(w.lim)
	var b wire.Batch
	for {
		select {
		case <-stop:
			for {
				select {
				case it := <-w.q:
					w.dequeued(it)
				default:
					return
				}
			}
		case it := <-w.q:
			w.dequeued(it)
			it.st.handle(it, dec, &b)
		case f := <-w.ctl:
			f(dec, &b)
		}
	}
}
