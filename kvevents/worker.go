package kvevents

import (
	"github.com/prometheus/client_golang/prometheus"
)

// worker applies the queued messages of the endpoints assigned to it, one at
// a time, so that each endpoint's messages apply in order. Its queue is
// bounded: enqueue never blocks the receiver.
type worker struct {
	q       chan item
	depth   prometheus.Gauge
	lim     Limits
	streams int // endpoints assigned; guarded by Pool.mu
}

func newWorker(size int, depth prometheus.Gauge, lim Limits) *worker {
	return &worker{q: make(chan item, size), depth: depth, lim: lim}
}

// enqueue offers it to the worker; false means the queue was full and the
// message was not queued.
func (w *worker) enqueue(it item) bool {
	w.depth.Inc()
	select {
	case w.q <- it:
		return true
	default:
		w.depth.Dec()
		return false
	}
}

// run applies messages until stop is closed. Messages still queued then are
// discarded (their endpoints are closing with the pool).
func (w *worker) run(stop <-chan struct{}) {
	dec := NewDecoder(w.lim)
	var b Batch
	for {
		select {
		case <-stop:
			for {
				select {
				case <-w.q:
					w.depth.Dec()
				default:
					return
				}
			}
		case it := <-w.q:
			w.depth.Dec()
			it.st.handle(it, dec, &b)
		}
	}
}
