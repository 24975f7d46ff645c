package render

import (
	"math"
	"sync/atomic"
	"time"
)

// Parameters of the latency tracker behind hedging.
const (
	// hedgeQuantile is the latency quantile after which a render is hedged.
	hedgeQuantile = 0.95
	// quantileStep is the tracker's step in the log domain: a sample above
	// the estimate raises it by e^(step·q) (about +15 % at q = 0.95), one
	// below lowers it by e^(-step·(1-q)) (about -0.8 %), so that the
	// estimate settles where a share 1-q of the samples exceed it, and
	// follows a latency that grows tenfold within some 16 samples. Steps
	// alone would take some 300 samples to follow a tenfold drop (or to
	// forget one slow first sample): see quantileRun.
	quantileStep = 0.15
	// quantileRun is how many samples in a row below the estimate bring it
	// down to the largest of them at once. At the true p95, 40 samples in
	// a row fall below it with probability 0.95^40 ≈ 13 %, and such a run
	// lowers the estimate only to its largest sample, just under the p95,
	// so the estimate is hardly biased (simulated on uniform, exponential
	// and log-normal latencies, 5.0 to 5.3 % of the samples exceed it,
	// against 5.0 % without runs). A latency that drops, however far, is
	// followed within 40 to 80 samples (the run under way when it drops
	// ends at the old level, the next one at the new), where the steps
	// alone took some 300 for a tenfold drop.
	quantileRun = 40
	// hedgeWarmup is how many samples an endpoint's tracker needs before
	// its estimate is trusted for hedging.
	hedgeWarmup = 20
	// minHedgeDelay is the least a render runs before it is hedged, so that
	// scheduling jitter on a renderer answering in a millisecond or two does
	// not double its load.
	minHedgeDelay = 10 * time.Millisecond
	// minQuantile keeps the estimate positive, so that it can grow again
	// multiplicatively after a run of zero-length samples.
	minQuantile = float64(time.Microsecond)
	// queueWaitWeight is the weight of a new sample in the recent queue
	// wait (an exponentially weighted moving average over some 8 waits).
	queueWaitWeight = 1.0 / 8
)

var (
	quantileUp   = math.Exp(quantileStep * hedgeQuantile)
	quantileDown = math.Exp(-quantileStep * (1 - hedgeQuantile))
)

// quantileTracker is a streaming estimate of one quantile of recent
// latencies in O(1) time and space, lock-free (stochastic approximation in
// the log domain, see quantileStep, with a run of samples below the
// estimate lowering it at once, see quantileRun). It forgets: the estimate
// follows the recent samples, not the whole history.
type quantileTracker struct {
	est atomic.Uint64 // float64 bits, nanoseconds
	n   atomic.Int64  // samples seen
	// run is the current run of samples below the estimate: its length in
	// the low 32 bits, its largest sample (float32 bits, nanoseconds) in
	// the high 32.
	run atomic.Uint64
}

// observe adds a latency sample.
func (q *quantileTracker) observe(d time.Duration) {
	x := max(float64(d), minQuantile)
	if q.n.Add(1) == 1 {
		q.est.Store(math.Float64bits(x))
		return
	}
	q.update(x)
}

// observeAtLeast adds a sample known only to be at least d (a render
// canceled after running d): it counts as a sample above the estimate when
// d already reaches it, and tells nothing otherwise.
func (q *quantileTracker) observeAtLeast(d time.Duration) {
	if q.n.Load() == 0 {
		return
	}
	x := float64(d)
	if x >= math.Float64frombits(q.est.Load()) {
		q.n.Add(1)
		q.update(x)
	}
}

func (q *quantileTracker) update(x float64) {
	var above bool
	for {
		old := q.est.Load()
		e := math.Float64frombits(old)
		if above = x > e; above {
			e *= quantileUp
		} else {
			e = max(e*quantileDown, minQuantile)
		}
		if q.est.CompareAndSwap(old, math.Float64bits(e)) {
			break
		}
	}
	if above {
		q.run.Store(0)
		return
	}
	for {
		old := q.run.Load()
		n, top := uint32(old)+1, max(math.Float32frombits(uint32(old>>32)), float32(x))
		next := uint64(math.Float32bits(top))<<32 | uint64(n)
		if n >= quantileRun {
			next = 0
		}
		if !q.run.CompareAndSwap(old, next) {
			continue
		}
		if n >= quantileRun {
			q.lower(max(float64(top), minQuantile))
		}
		return
	}
}

// lower brings the estimate down to x if it is above.
func (q *quantileTracker) lower(x float64) {
	for {
		old := q.est.Load()
		if math.Float64frombits(old) <= x || q.est.CompareAndSwap(old, math.Float64bits(x)) {
			return
		}
	}
}

// value returns the estimate, and whether enough samples back it.
func (q *quantileTracker) value() (time.Duration, bool) {
	n := q.n.Load()
	if n == 0 {
		return 0, false
	}
	return time.Duration(math.Float64frombits(q.est.Load())), n >= hedgeWarmup
}

// ewma is a lock-free exponentially weighted moving average of durations.
type ewma struct {
	bits atomic.Uint64 // float64 nanoseconds
}

func (e *ewma) observe(d time.Duration) {
	for {
		old := e.bits.Load()
		v := math.Float64frombits(old)
		v += (float64(d) - v) * queueWaitWeight
		if e.bits.CompareAndSwap(old, math.Float64bits(v)) {
			return
		}
	}
}

func (e *ewma) value() time.Duration { return time.Duration(math.Float64frombits(e.bits.Load())) }
