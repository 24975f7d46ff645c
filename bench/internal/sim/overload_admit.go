package sim

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/admission"
	"github.com/kvroute/kvroute/enginemetrics"
	"github.com/kvroute/kvroute/render"
	"github.com/kvroute/kvroute/simengine"
	"github.com/kvroute/kvroute/telemetry"
)

// DefaultOverloadAdmission is the admission configuration of the
// kvroute+admission policy: objectives "interactive" (priority 1) and
// "batch" (priority -1, sheddable), round robin between fairness IDs, FCFS
// within one, and the own accounting's throughput calibrated to the
// engines' prefill speed (as examples/calibrate would measure it). Every
// other field is the package's default.
func DefaultOverloadAdmission(f Fleet) admission.Config {
	return admission.Config{
		Objectives: []admission.Objective{
			{Name: ClassInteractive, Priority: 1},
			{Name: ClassBatch, Priority: -1},
		},
		Saturation: admission.Saturation{PeakPrefillThroughput: f.PrefillTokensPerSecond},
	}
}

// admitReport is the outcome of one request's Admit call.
type admitReport struct {
	id  int
	err error
}

// admitDriver runs the real admission.Controller inside the discrete-event
// simulation. Every request calls Controller.Admit in a goroutine of its
// own, as a gateway's handler does; the driver makes the result
// deterministic by letting only one thing happen at a time and waiting,
// after each, until every goroutine it woke has either reported its
// outcome or is parked in the queue again:
//
//   - an arrival's Admit either returns (admitted, shed, queue full) or
//     arms its deadline timer on the stepClock, which the Controller does
//     only once the request is queued;
//   - a queue pass (an arrival, Notify, the re-check) removes requests
//     from the queue under the Controller's lock; their number is the
//     parked goroutines the driver knows of minus Controller.Queued()
//     afterwards, and the driver waits for exactly that many reports;
//   - a deadline the driver fires wakes exactly its own request.
//
// Requests released together in one pass are routed in priority order,
// then in arrival order (the Controller's own order within the pass cannot
// be observed from outside; both orders dispatch the same set).
//
// Real: the Controller (admission.New with the study's Config), its queue,
// bands, round robin, deadlines, shedding, claims, re-check and saturation
// decision, its own accounting on the Router's load tracker (SetLoad), and
// its dispatch gate (Controller.Hold, run between each pick and its send
// like Admit: in a goroutine of its own, parked when it waits at the gate;
// without the gate it is still called after every pick, as the gateway
// does, and returns at once), with the context Admit had, which carries the
// request's record (admission.Track, as FromHeader adds it in the gateway).
// Modelled: the clock (stepClock), the engine signals (engineScrape, from
// the simulated engines' stats instead of an HTTP scrape), and the host:
// the simulation calls Admit itself and then the Router's Pick, instead of
// giving the Controller to the Router as kvroute.Options.Admission, because
// released requests picking in their own goroutines would pick in an order
// the simulation could not repeat; Pick with Options.Admission runs Admit
// and then the same pick. Notify follows every pick, first token and end,
// as the gateway's handler does.
type admitDriver struct {
	ctl     *admission.Controller
	clk     *stepClock
	eps     []kvroute.Endpoint
	results chan admitReport
	parked  map[int]*overloadReq // queued, not yet reported
	byID    func(int) *overloadReq
}

func newAdmitDriver(cfg admission.Config, clk *stepClock, eps []kvroute.Endpoint, byID func(int) *overloadReq, signals admission.EngineSignals, detectors ...admission.Detector) (*admitDriver, error) {
	ctl, err := admission.New(cfg, admission.Options{Set: telemetry.Set{Clock: clk}, Detectors: detectors, Signals: signals})
	if err != nil {
		return nil, err
	}
	return &admitDriver{ctl: ctl, clk: clk, eps: eps, results: make(chan admitReport), parked: map[int]*overloadReq{}, byID: byID}, nil
}

// admit runs one arrival's Admit and returns every outcome the action
// decided (its own, unless it queued, and those of queued requests it
// released or pushed out).
func (d *admitDriver) admit(rq *overloadReq) []admitReport {
	ctx := admission.Track(admission.WithFairnessID(admission.WithObjective(context.Background(), rq.class), rq.tenant))
	rq.ctx = ctx
	req := &kvroute.Request{Prompts: []render.Prompt{{TokenIDs: rq.prompt}}}
	go func(id int) {
		err := d.ctl.Admit(ctx, req, d.eps)
		d.results <- admitReport{id: id, err: err}
	}(rq.id)
	var got []admitReport
	for queued := false; !queued; {
		select {
		case t := <-d.clk.created:
			t.owner, queued = rq.id, true
			d.parked[rq.id] = rq
		case r := <-d.results:
			got = append(got, r)
			if r.id == rq.id && d.parked[r.id] == nil {
				return d.settle(got)
			}
		}
	}
	return d.settle(got)
}

// hold runs the dispatch gate (Controller.Hold) for a picked request, as
// the gateway does between the pick and the send, with the context its
// Admit had, and returns every outcome the action decided: its own unless
// it waits at the gate, and those of the queued requests it released (Hold
// lets go of the claim the request's own release took).
func (d *admitDriver) hold(rq *overloadReq, ep kvroute.Endpoint) []admitReport {
	go func(id int) {
		err := d.ctl.Hold(rq.ctx, ep)
		d.results <- admitReport{id: id, err: err}
	}(rq.id)
	var got []admitReport
	for {
		select {
		case t := <-d.clk.created:
			t.owner = rq.id
			d.parked[rq.id] = rq
			rq.held = true
			return d.settle(got)
		case r := <-d.results:
			got = append(got, r)
			if r.id == rq.id {
				return d.settle(got)
			}
		}
	}
}

// picked is Hold without the dispatch gate, for a picked request: it
// returns at once, having let go of the claim the request's release took,
// and picked returns the outcomes of the queued requests that released.
func (d *admitDriver) picked(rq *overloadReq, ep kvroute.Endpoint) []admitReport {
	if err := d.ctl.Hold(rq.ctx, ep); err != nil {
		panic(fmt.Sprintf("sim: Hold without the gate: %v", err))
	}
	return d.settle(nil)
}

// notify is Controller.Notify(endpoint) and its outcomes.
func (d *admitDriver) notify(endpoint string) []admitReport {
	d.ctl.Notify(endpoint)
	return d.settle(nil)
}

// fire runs one due timer of the stepClock: a queued request's deadline
// (its goroutine wakes and leaves the queue) or the Controller's re-check.
func (d *admitDriver) fire(t *stepTimer, now time.Time) []admitReport {
	if t.f != nil {
		t.f()
		return d.settle(nil)
	}
	select {
	case t.c <- now:
	default:
	}
	if d.parked[t.owner] == nil {
		return nil // already decided: its goroutine stopped the timer too late to matter
	}
	r := <-d.results
	delete(d.parked, r.id)
	return []admitReport{r}
}

// settle waits for the reports of every parked request that left the queue
// in the action just taken; got holds those already received.
func (d *admitDriver) settle(got []admitReport) []admitReport {
	need := len(d.parked) - d.ctl.Queued() - d.ctl.Held()
	for _, r := range got {
		if d.parked[r.id] != nil {
			delete(d.parked, r.id)
			need--
		}
	}
	for ; need > 0; need-- {
		r := <-d.results
		delete(d.parked, r.id)
		got = append(got, r)
	}
	return got
}

// waiting counts the parked requests of each interactive tenant and of the
// batch class.
func (d *admitDriver) waiting() (a, b, batch int) {
	for _, rq := range d.parked {
		switch rq.tenant {
		case TenantA:
			a++
		case TenantB:
			b++
		default:
			batch++
		}
	}
	return a, b, batch
}

// close ends the Controller; every request still queued is refused.
func (d *admitDriver) close() {
	n := len(d.parked)
	d.ctl.Close()
	for range n {
		<-d.results
	}
	d.parked = nil
}

// engineScrape is the admission's engine Detector in the overload study:
// the signal enginemetrics.Scraper computes from vLLM's
// vllm:num_requests_waiting and vllm:kv_cache_usage_perc, read from the
// simulated engines' Stats instead of over HTTP, refreshed when a scrape
// interval has passed since the last refresh (enginemetrics'
// DefaultInterval), and judged with enginemetrics' default thresholds.
// The HTTP scrape and its parsing are not simulated (enginemetrics' own
// tests cover them); the decision rule and its thresholds are the
// package's.
type engineScrape struct {
	mu       sync.Mutex
	clk      *stepClock
	engines  []*simengine.Engine
	index    map[string]int
	interval time.Duration
	at       time.Time
	sat      []bool
	sig      []enginemetrics.Signal
	th       EngineThresholds
}

// EngineThresholds are the engine detector's thresholds, as in
// enginemetrics.Config: a negative value ignores the signal.
type EngineThresholds struct {
	Waiting int     `json:"waiting"`
	KVCache float64 `json:"kvCache"`
}

// DefaultEngineThresholds are enginemetrics' defaults (5 waiting requests,
// 80 % KV-cache usage).
func DefaultEngineThresholds() EngineThresholds {
	return EngineThresholds{Waiting: enginemetrics.DefaultWaitingThreshold, KVCache: enginemetrics.DefaultKVCacheThreshold}
}

func newEngineScrape(clk *stepClock, engines []*simengine.Engine, ids []string, th EngineThresholds) *engineScrape {
	s := &engineScrape{clk: clk, engines: engines, index: map[string]int{}, interval: enginemetrics.DefaultInterval, sat: make([]bool, len(engines)), sig: make([]enginemetrics.Signal, len(engines)), th: th}
	for i, id := range ids {
		s.index[id] = i
	}
	return s
}

// refreshLocked re-reads the engines when a scrape interval has passed.
func (s *engineScrape) refreshLocked() {
	if now := s.clk.Now(); s.at.IsZero() || now.Sub(s.at) >= s.interval {
		s.at = now
		for j, e := range s.engines {
			st := e.Stats()
			usage := 1 - float64(st.FreeBlocks)/float64(max(st.NumBlocks, 1))
			s.sig[j] = enginemetrics.Signal{Waiting: st.Waiting, Running: st.Running, KVCacheUsage: usage, Scraped: now}
			s.sat[j] = (s.th.Waiting >= 0 && st.Waiting >= s.th.Waiting) || (s.th.KVCache >= 0 && usage >= s.th.KVCache)
		}
	}
}

// Saturation implements admission.Detector; the signal is always fresh.
func (s *engineScrape) Saturation(ep kvroute.Endpoint) (saturated, known bool) {
	i, ok := s.index[ep.ID]
	if !ok {
		return false, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refreshLocked()
	return s.sat[i], true
}

// Signal implements admission.EngineSignals, as enginemetrics.Scraper
// does: the engine's waiting and running requests and KV-cache usage at
// the last scrape; always fresh.
func (s *engineScrape) Signal(ep kvroute.Endpoint) (enginemetrics.Signal, bool) {
	i, ok := s.index[ep.ID]
	if !ok {
		return enginemetrics.Signal{}, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refreshLocked()
	return s.sig[i], true
}
