package sim

import (
	"math"
	"time"
)

// OverloadResult is one policy's outcome on one overload run.
type OverloadResult struct {
	Policy OverloadPolicy `json:"policy"`
	Load   float64        `json:"load"`
	// OfferedQPS is Load × the measured capacity; Window the virtual time
	// from the first arrival to the last, goodput's denominator.
	OfferedQPS float64       `json:"offeredQPS"`
	Window     time.Duration `json:"window"`

	// Interactive and Batch are the classes' request counts and outcomes.
	Interactive ClassOutcome `json:"interactive"`
	Batch       ClassOutcome `json:"batch"`

	// InteractiveTTFTP50 and P90 are the interactive class's time to first
	// token from arrival at the gateway (admission queueing included);
	// requests refused or never served count as infinitely late, and -1
	// means that quantile fell on one.
	InteractiveTTFTP50 time.Duration `json:"interactiveTTFTP50"`
	InteractiveTTFTP90 time.Duration `json:"interactiveTTFTP90"`
	// QueueP90 and EngineP90 split the interactive TTFT: the 90th
	// percentile of the wait at the gateway (arrival to dispatch) and of
	// the engine's part (dispatch to first token).
	QueueP90  time.Duration `json:"queueP90"`
	EngineP90 time.Duration `json:"engineP90"`
	// BatchTTFTP50 is the batch class's median TTFT over its served
	// requests.
	BatchTTFTP50 time.Duration `json:"batchTTFTP50"`
	// Goodput is the interactive requests whose TTFT met the objective,
	// per second of Window.
	Goodput float64 `json:"goodput"`
	// BatchShedRate is the batch requests refused (shed, queue full or
	// expired) over those offered.
	BatchShedRate float64 `json:"batchShedRate"`

	// TenantAShare is tenant A's share of the interactive requests released
	// from a gateway queue while both tenants still had requests waiting
	// (Contended of them); -1 when none were. DispatchedAShare is its share
	// of every dispatched interactive request.
	TenantAShare     float64 `json:"tenantAShare"`
	Contended        int     `json:"contended"`
	DispatchedAShare float64 `json:"dispatchedAShare"`

	// InteractiveRefusedWhileBatchQueued counts interactive refusals made
	// while batch requests waited in the queue; PriorityInversions batch
	// releases while interactive requests stayed queued. Both must be 0.
	InteractiveRefusedWhileBatchQueued int `json:"interactiveRefusedWhileBatchQueued"`
	PriorityInversions                 int `json:"priorityInversions"`

	// HitRate is the engines' prefix-cache hit rate; Makespan the virtual
	// time from the first arrival to the last completion; Wall the host
	// time of the run.
	HitRate float64 `json:"hitRate"`
	// Preemptions is the engines' recompute preemptions (KV blocks ran out).
	Preemptions uint64        `json:"preemptions"`
	Makespan    time.Duration `json:"makespan"`
	Wall        time.Duration `json:"wall"`
}

// ClassOutcome counts one class's requests by outcome.
type ClassOutcome struct {
	Offered   int `json:"offered"`
	Completed int `json:"completed"`
	// Refused by reason: shed, queue_full, expired.
	Shed      int `json:"shed"`
	QueueFull int `json:"queueFull"`
	Expired   int `json:"expired"`
	// MetObjective counts the requests whose TTFT met the objective.
	MetObjective int `json:"metObjective"`
}

// refused is the class's refusals of every reason.
func (c ClassOutcome) refused() int { return c.Shed + c.QueueFull + c.Expired }

// unserved stands for an interactive request with no first token.
const unserved = time.Duration(math.MaxInt64)

func (o *overloadRun) result() OverloadResult {
	res := OverloadResult{Policy: o.policy, Load: o.oc.Load, OfferedQPS: o.oc.Load * o.oc.Capacity,
		InteractiveRefusedWhileBatchQueued: o.interShedBusy, PriorityInversions: o.inversions, TenantAShare: -1}
	if n := len(o.arrivals); n > 0 {
		res.Window = o.arrivals[n-1].at.Sub(o.arrivals[0].at)
	}
	var inter, batch []time.Duration
	var contA, cont, dispA, disp int
	var last time.Time
	for _, rq := range o.reqs {
		c := &res.Batch
		if rq.class == ClassInteractive {
			c = &res.Interactive
		}
		c.Offered++
		switch rq.refused {
		case "":
		case "shed":
			c.Shed++
		case "queue_full":
			c.QueueFull++
		default:
			c.Expired++
		}
		ttft := unserved
		if !rq.first.IsZero() {
			ttft = rq.first.Sub(rq.arrived)
			if ttft <= o.oc.TTFTObjective {
				c.MetObjective++
			}
		}
		if rq.finished && !rq.failed {
			c.Completed++
			if rq.finish.After(last) {
				last = rq.finish
			}
		}
		if rq.class == ClassInteractive {
			inter = append(inter, ttft)
			if rq.dispatched {
				disp++
				dispA += btoi(rq.tenant == TenantA)
			}
			if rq.contended {
				cont++
				contA += btoi(rq.tenant == TenantA)
			}
		} else if ttft != unserved {
			batch = append(batch, ttft)
		}
	}
	var qw, ew []time.Duration
	for _, rq := range o.reqs {
		if rq.class == ClassInteractive && !rq.first.IsZero() {
			qw = append(qw, rq.sent.Sub(rq.arrived))
			ew = append(ew, rq.first.Sub(rq.sent))
		}
	}
	res.QueueP90, res.EngineP90 = percentile(qw, 0.9), percentile(ew, 0.9)
	res.InteractiveTTFTP50, res.InteractiveTTFTP90 = served(percentile(inter, 0.5)), served(percentile(inter, 0.9))
	res.BatchTTFTP50 = percentile(batch, 0.5)
	if res.Window > 0 {
		res.Goodput = float64(res.Interactive.MetObjective) / res.Window.Seconds()
	}
	if res.Batch.Offered > 0 {
		res.BatchShedRate = float64(res.Batch.refused()) / float64(res.Batch.Offered)
	}
	if cont > 0 {
		res.TenantAShare, res.Contended = float64(contA)/float64(cont), cont
	}
	if disp > 0 {
		res.DispatchedAShare = float64(dispA) / float64(disp)
	}
	if !last.IsZero() && len(o.arrivals) > 0 {
		res.Makespan = last.Sub(o.arrivals[0].at)
	}
	var hits, queries uint64
	for _, e := range o.engines {
		st := e.Stats()
		hits, queries = hits+st.PrefixCacheHits, queries+st.PrefixCacheQueries
		res.Preemptions += st.Preemptions
	}
	if queries > 0 {
		res.HitRate = float64(hits) / float64(queries)
	}
	return res
}

// served maps the unserved sentinel to -1.
func served(d time.Duration) time.Duration {
	if d == unserved {
		return -1
	}
	return d
}

// capacityProbeLoad is the offered load, as a multiple of the fleet's
// no-hit prefill capacity, at which MeasureCapacity keeps the fleet
// backlogged.
const capacityProbeLoad = 10

// MeasureCapacity returns the fleet's capacity on oc's workload in
// requests per second: the completion rate of kvroute without admission
// when the fleet is kept backlogged (arrivals at capacityProbeLoad × the
// no-hit prefill capacity, completions over the time from the first
// arrival to the last completion). With prefix reuse and decode the fleet
// serves a different rate than its prefill speed alone says, so the loads
// of the study are multiples of this measured rate.
func MeasureCapacity(oc OverloadConfig) (float64, error) {
	oc.Capacity = 1 // validated below with the no-hit capacity
	cfg, err := oc.validate()
	if err != nil {
		return 0, err
	}
	oc.Capacity, oc.Load = cfg.Capacity(), capacityProbeLoad
	res, err := RunOverload(oc, OverloadKVRoute)
	if err != nil {
		return 0, err
	}
	if res.Makespan <= 0 {
		return 0, ErrStalled
	}
	return float64(res.Interactive.Completed+res.Batch.Completed) / res.Makespan.Seconds(), nil
}
