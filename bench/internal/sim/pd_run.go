package sim

import (
	"fmt"
	"time"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/disagg"
	"github.com/kvroute/kvroute/kvevents"
	"github.com/kvroute/kvroute/kvevents/wire"
	"github.com/kvroute/kvroute/kvindex"
	"github.com/kvroute/kvroute/simengine"
	"github.com/kvroute/kvroute/telemetry"
)

// pdReq is one request of a P/D run.
type pdReq struct {
	id            int
	session, turn int // session -1: a document
	prompt        []uint32
	answer        []uint32
	arrived       time.Time
	first         time.Time
	finish        time.Time
	prefilled     time.Time // a split request's prefiller token (TestPDWhereTheTailIs)
	pulled        time.Time // a split request's KV on its decoder
	decode        int
	prefill       int // -1: prefilled on the decode engine
	pf            *pdSeq
	decision      *kvroute.Decision // kvroute policies
	dq, pq        request           // dynamo: its decode and prefill picks
}

// pdNote is an engine callback waiting to be handled.
type pdNote struct {
	rq   *pdReq
	kind int
	at   time.Time
}

const (
	noteFirst     = iota // the decode engine's first token
	noteDone             // the decode engine's last token
	notePrefilled        // the prefiller's one token
	notePulled           // the decoder has the prompt's KV
)

// pdRun is one policy on one P/D run.
type pdRun struct {
	cfg     PDConfig
	policy  PDPolicy
	tr      *pdTrace
	start   time.Time
	now     time.Time
	roles   []PDRole
	ids     []string
	engines []*pdEngine
	events  *eventPath
	rt      pdRouter
	next    int // next unit of tr
	turns   timeQueue[pdTurn]
	notes   []pdNote
	reqs    []*pdReq
}

// RunPD simulates one policy on one P/D configuration.
func RunPD(c PDConfig, policy PDPolicy) (PDResult, error) {
	wall := time.Now()
	r, err := runPD(c, policy)
	if err != nil {
		return PDResult{}, err
	}
	res := r.result()
	res.Wall = time.Since(wall)
	return res, nil
}

// runPD runs one policy to the end and returns the finished run.
func runPD(c PDConfig, policy PDPolicy) (*pdRun, error) {
	if err := c.validate(); err != nil {
		return nil, err
	}
	r := &pdRun{cfg: c, policy: policy, start: simengine.DefaultStart}
	r.now = r.start
	r.tr = newPDTrace(c, r.start)
	defer r.teardown()
	if err := r.setup(); err != nil {
		return nil, err
	}
	if err := r.loop(); err != nil {
		return nil, err
	}
	return r, nil
}

// setup builds the engines of the policy's fleet, the event path and the
// policy.
func (r *pdRun) setup() error {
	c := r.cfg
	n := c.Prefill + c.Decode
	r.ids = endpointIDs(n)
	for i := range n {
		role := RoleBoth
		if r.policy != PDAggregated {
			role = RoleDecode
			if i < c.Prefill {
				role = RolePrefill
			}
		}
		r.roles = append(r.roles, role)
	}
	r.events = &eventPath{delay: c.Base.EventDelay, ids: r.ids, dec: wire.NewDecoder(wire.Limits{})}
	f := c.Base.Fleet
	ec := pdEngineConfig{BlockSize: f.BlockSize, NumBlocks: f.NumGPUBlocks, MaxBatched: f.MaxNumBatchedTokens, MaxSeqs: f.MaxNumSeqs,
		PrefillTokensPerSecond: f.PrefillTokensPerSecond, StepCost: f.DecodeStep, Transfer: c.Transfer}
	for i := range n {
		r.engines = append(r.engines, newPDEngine(ec, r.roles[i], r.start, func(b simengine.EventBatch) { r.events.publish(i, b) }))
	}
	clock := func() time.Time { return r.now }
	subscribe := func(ix *kvindex.Index) error {
		a, err := kvevents.NewApplier(kvevents.ApplierConfig{Model: simModel}, ix, kvevents.Options{})
		if err != nil {
			return err
		}
		r.events.subs = append(r.events.subs, eventSub{applier: a})
		return nil
	}
	switch r.policy {
	case PDAggregated, PDAlways, PDDecider:
		var profile *disagg.Profile
		if r.policy != PDAggregated {
			cfg := disagg.Config{NonCachedTokens: -1} // always: every request with a prompt splits
			if r.policy == PDDecider {
				cfg = c.PDDecider()
			}
			p, err := disagg.New(cfg, disagg.Options{})
			if err != nil {
				return err
			}
			profile = p
		}
		k, err := newPDKVRoute(c.Base, r.ids, r.roles, clock, c.Base.Seed, profile, c.Workload.OutputTokens)
		if err != nil {
			if profile != nil {
				profile.Close()
			}
			return err
		}
		r.rt = k
		return subscribe(k.r.Index())
	case PDDynamo:
		ix, err := kvindex.New(kvindex.Config{BlockSize: f.BlockSize, SweepInterval: -1}, kvindex.Options{Set: telemetry.Set{Clock: virtualClock{now: clock}}})
		if err != nil {
			return err
		}
		r.rt = newPDDynamo(c, ix, r.ids, r.roles, clock)
		return subscribe(ix)
	}
	return fmt.Errorf("%w: unknown P/D policy %q", ErrInvalidConfig, r.policy)
}

func (r *pdRun) teardown() {
	if r.rt != nil {
		r.rt.close()
	}
}

// loop advances the virtual clock from event to event: KV-event
// deliveries, engine steps and transfers (their callbacks handled in
// order), then arrivals.
func (r *pdRun) loop() error {
	deadline := r.start.Add(r.cfg.Base.MaxVirtualTime)
	for {
		next, ok := r.nextTime()
		if !ok {
			return nil
		}
		if next.Before(r.now) {
			next = r.now
		}
		if next.After(deadline) {
			return fmt.Errorf("%w: virtual time passed %v", ErrStalled, r.cfg.Base.MaxVirtualTime)
		}
		r.now = next
		r.events.deliver(r.now)
		for _, e := range r.engines {
			if t, ok := e.nextTime(); ok && !t.After(r.now) {
				e.advance(r.now)
			}
		}
		if err := r.handle(); err != nil {
			return err
		}
		for {
			rq := r.due()
			if rq == nil {
				break
			}
			if err := r.route(rq); err != nil {
				return err
			}
			if err := r.handle(); err != nil {
				return err
			}
		}
	}
}

func (r *pdRun) nextTime() (time.Time, bool) {
	var next time.Time
	found := false
	consider := func(t time.Time, ok bool) {
		if ok && (!found || t.Before(next)) {
			next, found = t, true
		}
	}
	consider(r.events.next())
	for _, e := range r.engines {
		consider(e.nextTime())
	}
	if r.next < len(r.tr.units) {
		consider(r.tr.units[r.next].at, true)
	}
	if t, ok := r.turns.next(); ok {
		consider(t, true)
	}
	return next, found
}

// due returns the next request arriving by now: a session's next turn or
// a new unit, earliest first.
func (r *pdRun) due() *pdReq {
	var unit *pdUnit
	if r.next < len(r.tr.units) && !r.tr.units[r.next].at.After(r.now) {
		unit = &r.tr.units[r.next]
	}
	if at, ok := r.turns.next(); ok && !at.After(r.now) && (unit == nil || !unit.at.Before(at)) {
		at, t := r.turns.pop()
		return r.request(t.session, t.turn, at)
	}
	if unit == nil {
		return nil
	}
	r.next++
	if unit.session < 0 {
		rq := &pdReq{id: len(r.reqs), session: -1, turn: unit.doc, prompt: r.tr.docs[unit.doc], answer: r.tr.docAns[unit.doc], arrived: unit.at}
		r.reqs = append(r.reqs, rq)
		return rq
	}
	return r.request(unit.session, 0, unit.at)
}

func (r *pdRun) request(s, k int, at time.Time) *pdReq {
	p, a := r.tr.turn(s, k)
	rq := &pdReq{id: len(r.reqs), session: s, turn: k, prompt: p, answer: a, arrived: at}
	r.reqs = append(r.reqs, rq)
	return rq
}

// route picks the request's engines and submits it: to the prefiller
// first when it splits, else to the decode (or both-role) engine.
func (r *pdRun) route(rq *pdReq) error {
	d, p, err := r.rt.route(rq)
	if err != nil {
		return fmt.Errorf("sim: %s route: %w", r.policy, err)
	}
	rq.decode, rq.prefill = d, p
	if p < 0 {
		r.submitDecode(rq, false)
		return nil
	}
	rq.pf = &pdSeq{tokens: rq.prompt, promptLen: len(rq.prompt), maxOut: 1, hold: true,
		onFirst: func(at time.Time) { r.notes = append(r.notes, pdNote{rq: rq, kind: notePrefilled, at: at}) }}
	r.engines[p].submit(r.now, rq.pf)
	return nil
}

// submitDecode sends the request to its decode engine; remote: its prompt's
// KV is pulled from the prefiller.
func (r *pdRun) submitDecode(rq *pdReq, remote bool) {
	tokens := make([]uint32, 0, len(rq.prompt)+len(rq.answer))
	tokens = append(append(tokens, rq.prompt...), rq.answer...)
	s := &pdSeq{tokens: tokens, promptLen: len(rq.prompt), maxOut: r.cfg.Workload.OutputTokens, remote: remote,
		onFirst: func(at time.Time) { r.notes = append(r.notes, pdNote{rq: rq, kind: noteFirst, at: at}) },
		onDone:  func(at time.Time) { r.notes = append(r.notes, pdNote{rq: rq, kind: noteDone, at: at}) },
	}
	if remote {
		s.onPulled = func(at time.Time) { r.notes = append(r.notes, pdNote{rq: rq, kind: notePulled, at: at}) }
	}
	r.engines[rq.decode].submit(r.now, s)
}

// handle runs the queued engine callbacks until none is left.
func (r *pdRun) handle() error {
	for len(r.notes) > 0 {
		n := r.notes[0]
		r.notes = r.notes[1:]
		rq := n.rq
		switch n.kind {
		case notePrefilled:
			rq.prefilled = n.at
			r.rt.prefilled(rq)
			r.submitDecode(rq, true)
		case notePulled:
			rq.pulled = n.at
			r.engines[rq.prefill].release(r.now, rq.pf)
		case noteFirst:
			rq.first = n.at
			r.rt.firstToken(rq)
		case noteDone:
			rq.finish = n.at
			r.rt.done(rq)
			if rq.session >= 0 && rq.turn+1 < r.cfg.Workload.Turns {
				r.turns.push(n.at.Add(r.tr.think[rq.session][rq.turn]), pdTurn{session: rq.session, turn: rq.turn + 1})
			}
		}
	}
	return nil
}

// pdTurn is a session's next turn, queued for the time it is due.
type pdTurn struct {
	session, turn int
}
