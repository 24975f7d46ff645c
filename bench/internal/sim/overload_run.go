package sim

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/kvroute/kvroute/admission"
	"github.com/kvroute/kvroute/kvindex"
	"github.com/kvroute/kvroute/simengine"
)

// overloadReq is one request of an overload run.
type overloadReq struct {
	request
	id         int
	class      string
	tenant     string
	arrived    time.Time
	dispatched bool
	sent       time.Time // when it was submitted to its engine
	first      time.Time // first token; zero until it comes
	refused    string    // the admission's reason ("shed", "queue_full", "expired", …); "" if not refused
	contended  bool      // released from a gateway queue while both tenants still had requests waiting
	picked     bool      // picked, not yet sent (waiting at the admission's dispatch gate)
	held       bool      // waited at the dispatch gate
	// ctx carries the admission's inputs and the request's record
	// (admission.Track) from Admit to Hold, as the gateway's does.
	ctx context.Context
}

// overloadNote is an engine callback waiting to be handled: a request's
// first token or its end.
type overloadNote struct {
	rq   *overloadReq
	done bool
	at   time.Time
	res  simengine.Result
}

// overloadRun is one policy on one overload run. It reuses the routing
// simulation's fleet, event path and routing policies (run) and replaces
// its arrival handling with the policy's dispatch decision.
type overloadRun struct {
	*run
	oc       OverloadConfig
	policy   OverloadPolicy
	arrivals []overloadArrival
	next     int
	reqs     []*overloadReq
	clk      *stepClock
	adm      *admitDriver // kvroute+admission
	dq       *dynamoQueue // dynamo+queue
	notes    []overloadNote
	work     []*overloadReq // released by the admission, to be routed
	sends    []*overloadReq // let through by the dispatch gate, to be sent
	unsent   []int          // engines whose picks ended unsent: the queue is woken for them

	inversions    int // batch released while interactive requests stayed queued
	interShedBusy int // interactive refusals while batch requests were queued
}

// RunOverload simulates one policy on one overload configuration.
func RunOverload(oc OverloadConfig, policy OverloadPolicy) (OverloadResult, error) {
	res, _, err := runOverload(oc, policy)
	return res, err
}

// runOverload is RunOverload that also returns the run's requests, for the
// tests' analyses.
func runOverload(oc OverloadConfig, policy OverloadPolicy) (OverloadResult, []*overloadReq, error) {
	cfg, err := oc.validate()
	if err != nil {
		return OverloadResult{}, nil, err
	}
	if err := oc.DynamoQueue.validate(); err != nil {
		return OverloadResult{}, nil, err
	}
	wall := time.Now()
	r := &run{cfg: cfg, policy: policy.routing(oc.KVRoute), start: simengine.DefaultStart, oracleSeen: map[kvindex.Key]struct{}{}}
	r.now = r.start
	r.ids = endpointIDs(cfg.Fleet.Engines)
	defer r.teardown()
	if err := r.setup(); err != nil {
		return OverloadResult{}, nil, err
	}
	o := &overloadRun{run: r, oc: oc, policy: policy, arrivals: overloadTrace(oc, r.start), clk: newStepClock(r.start)}
	switch policy {
	case OverloadAdmission:
		eps := slices.Clone(r.rts[0].(*kvrouter).eps)
		var dets []admission.Detector
		var signals admission.EngineSignals
		if oc.EngineSignals {
			es := newEngineScrape(o.clk, r.engines, r.ids, oc.EngineThresholds)
			dets, signals = append(dets, es), es
		}
		if !oc.Gate {
			oc.Admission.Headroom.Disabled = true
		}
		o.adm, err = newAdmitDriver(oc.Admission, o.clk, eps, func(id int) *overloadReq { return o.reqs[id] }, signals, dets...)
		if err != nil {
			return OverloadResult{}, nil, err
		}
		o.adm.ctl.SetLoad(r.rts[0].(*kvrouter).r.Load())
		defer o.adm.close()
	case OverloadDynamo:
		o.dq = newDynamoQueue(oc.DynamoQueue, r.rts[0].(*dynamo), cfg.Fleet.MaxNumBatchedTokens)
	}
	if err := o.loop(); err != nil {
		return OverloadResult{}, nil, err
	}
	res := o.result()
	res.Wall = time.Since(wall)
	return res, o.reqs, nil
}

// loop advances the virtual clock from event to event: KV-event
// deliveries, engine steps (their first tokens and ends wake the queues),
// the admission's timers (deadlines, re-check), then arrivals.
func (o *overloadRun) loop() error {
	deadline := o.start.Add(o.cfg.MaxVirtualTime)
	for {
		next, ok := o.nextTime()
		if !ok {
			return nil
		}
		if next.Before(o.now) {
			next = o.now
		}
		if next.After(deadline) {
			return fmt.Errorf("%w: virtual time passed %v", ErrStalled, o.cfg.MaxVirtualTime)
		}
		o.now = next
		o.clk.set(next)
		o.events.deliver(o.now)
		for _, e := range o.engines {
			if t, ok := e.NextEventTime(); ok && !t.After(o.now) {
				e.AdvanceTo(o.now)
			}
		}
		if err := o.pending(); err != nil {
			return err
		}
		if o.adm != nil {
			for t := o.clk.popDue(); t != nil; t = o.clk.popDue() {
				o.handle(o.adm.fire(t, o.now))
				if err := o.pending(); err != nil {
					return err
				}
			}
		}
		for o.next < len(o.arrivals) && !o.arrivals[o.next].at.After(o.now) {
			if err := o.arrive(o.arrivals[o.next]); err != nil {
				return err
			}
			o.next++
		}
	}
}

// nextTime is the earliest delivery, engine step, admission timer or
// arrival.
func (o *overloadRun) nextTime() (time.Time, bool) {
	var next time.Time
	found := false
	consider := func(t time.Time, ok bool) {
		if ok && (!found || t.Before(next)) {
			next, found = t, true
		}
	}
	consider(o.events.next())
	for _, e := range o.engines {
		consider(e.NextEventTime())
	}
	if o.next < len(o.arrivals) {
		consider(o.arrivals[o.next].at, true)
	}
	if o.adm != nil {
		consider(o.clk.next())
	}
	return next, found
}

// arrive takes one request at the gateway: the admission decides, Dynamo's
// queue parks it, or it is routed at once.
func (o *overloadRun) arrive(a overloadArrival) error {
	rq := &overloadReq{id: len(o.reqs), class: a.class, tenant: a.tenant, arrived: a.at}
	rq.arrival = arrival{at: a.at, prompt: a.prompt, session: -1}
	o.reqs = append(o.reqs, rq)
	switch {
	case o.adm != nil:
		o.handle(o.adm.admit(rq))
	case o.dq != nil && o.dq.enqueue(rq):
	default:
		if err := o.route(rq); err != nil {
			return err
		}
	}
	return o.pending()
}

// handle takes the outcomes of one admission action: refusals are
// recorded, released requests queued for routing (priority first, then
// arrival), and the study's invariants checked against what is still
// waiting.
func (o *overloadRun) handle(reports []admitReport) {
	if len(reports) == 0 {
		return
	}
	a, b, batch := o.adm.waiting()
	var released []*overloadReq
	var sends []*overloadReq
	for _, r := range reports {
		rq := o.reqs[r.id]
		if rq.picked {
			// The dispatch gate's outcome: send, or end the pick unsent.
			rq.picked = false
			if r.err != nil {
				rq.refused = admission.Reason(r.err)
				if rq.refused == "" {
					rq.refused = r.err.Error()
				}
				o.rts[0].done(&rq.request)
				o.unsent = append(o.unsent, rq.engine)
				continue
			}
			if rq.class == ClassBatch && a+b > 0 {
				o.inversions++
			}
			sends = append(sends, rq)
			continue
		}
		if r.err != nil {
			rq.refused = admission.Reason(r.err)
			if rq.refused == "" {
				rq.refused = r.err.Error()
			}
			if rq.class == ClassInteractive && batch > 0 {
				o.interShedBusy++
			}
			continue
		}
		released = append(released, rq)
	}
	slices.SortFunc(released, func(x, y *overloadReq) int {
		if px, py := x.priority(), y.priority(); px != py {
			return py - px
		}
		return x.id - y.id
	})
	for _, rq := range released {
		if rq.class == ClassBatch && a+b > 0 {
			o.inversions++
		}
		rq.contended = rq.class == ClassInteractive && a > 0 && b > 0
	}
	o.work = append(o.work, released...)
	slices.SortFunc(sends, func(x, y *overloadReq) int { return x.id - y.id })
	o.sends = append(o.sends, sends...)
}

// priority is the request's class priority.
func (rq *overloadReq) priority() int {
	if rq.class == ClassInteractive {
		return 1
	}
	return -1
}

// pending routes released requests and handles engine callbacks until
// neither is left.
func (o *overloadRun) pending() error {
	for len(o.work) > 0 || len(o.notes) > 0 || len(o.sends) > 0 || len(o.unsent) > 0 {
		if len(o.sends) > 0 {
			rq := o.sends[0]
			o.sends = o.sends[1:]
			if err := o.send(rq); err != nil {
				return err
			}
			continue
		}
		if len(o.unsent) > 0 {
			i := o.unsent[0]
			o.unsent = o.unsent[1:]
			if err := o.wake(i); err != nil {
				return err
			}
			continue
		}
		if len(o.work) > 0 {
			rq := o.work[0]
			o.work = o.work[1:]
			if err := o.route(rq); err != nil {
				return err
			}
			continue
		}
		n := o.notes[0]
		o.notes = o.notes[1:]
		rt := o.rts[0]
		if n.done {
			rt.done(&n.rq.request)
			n.rq.finished, n.rq.finish = true, n.res.Finish
			n.rq.failed = n.res.Err != nil
		} else {
			rt.firstToken(&n.rq.request)
			n.rq.first = n.at
		}
		if err := o.wake(n.rq.engine); err != nil {
			return err
		}
	}
	return nil
}

// wake tells the policy's queue that engine i's load moved.
func (o *overloadRun) wake(i int) error {
	switch {
	case o.adm != nil:
		o.handle(o.adm.notify(o.ids[i]))
	case o.dq != nil:
		for {
			a, b := o.dq.a, o.dq.b
			rq := o.dq.release()
			if rq == nil {
				break
			}
			if rq.class == ClassInteractive {
				a, b = a-btoi(rq.tenant == TenantA), b-btoi(rq.tenant == TenantB)
				rq.contended = a > 0 && b > 0
			}
			if err := o.route(rq); err != nil {
				return err
			}
		}
	}
	return nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// route picks an engine for rq with the run's routing policy and submits
// it; with admission the pick is then notified, as the gateway does.
func (o *overloadRun) route(rq *overloadReq) error {
	rt := o.rts[0]
	i, err := rt.pick(&rq.request)
	if err != nil {
		return fmt.Errorf("sim: %s pick: %w", o.policy, err)
	}
	rq.engine = i
	if o.adm != nil && o.oc.Gate {
		rq.picked = true
		o.handle(o.adm.hold(rq, o.adm.eps[i]))
		return nil
	}
	if o.adm != nil {
		// The gateway calls Hold after every pick; without the gate it
		// returns at once, having let go of the request's claim.
		o.handle(o.adm.picked(rq, o.adm.eps[i]))
	}
	return o.send(rq)
}

// send submits a picked request to its engine; with admission the
// Controller is then notified, as the gateway does.
func (o *overloadRun) send(rq *overloadReq) error {
	i := rq.engine
	rq.dispatched, rq.sent = true, o.now
	e := o.engines[i]
	e.AdvanceTo(o.now)
	_, err := e.Submit(simengine.Request{
		Prompt: rq.prompt, MaxTokens: o.oc.Workload.OutputTokens,
		OnToken: func(t simengine.TokenEvent) {
			if t.Index == 0 {
				o.notes = append(o.notes, overloadNote{rq: rq, at: t.Time})
			}
		},
		OnDone: func(res simengine.Result) { o.notes = append(o.notes, overloadNote{rq: rq, done: true, res: res}) },
	})
	if err != nil {
		return fmt.Errorf("sim: submit to engine %d: %w", i, err)
	}
	if o.adm != nil {
		o.handle(o.adm.notify(o.ids[i]))
	}
	return nil
}
