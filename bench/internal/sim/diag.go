package sim

import "time"

// diagnostics are the tests' instruments on one run (nil in every real
// run; every method is nil-safe): one tie-break and exploration source for
// all the replicas (so R replicas that see what one router sees also draw
// what it draws), shared state applied at once (ideal: every queued
// decision and load change flushed and delivered the moment it is made),
// and a trace of every kvroute pick with the load the picking replica saw.
type diagnostics struct {
	random func() float64
	ideal  bool
	picks  []pickTrace
	// unscheduled counts the picks before which some replica held queued
	// decisions or load changes with no flush scheduled: changes its
	// publisher would never send (the cluster's publisher wakes on every
	// queued change, so this must stay 0).
	unscheduled int
	// reqs are the run's requests once it ended.
	reqs []*request
	// bound and queries are the run's reference string for the bounds and
	// its prompt tokens, once it ended.
	bound   *boundTrace
	queries int64
}

// pickTrace is one kvroute pick as the diagnostics saw it.
type pickTrace struct {
	at       time.Duration // virtual time since the start
	replica  int
	engine   int
	outcome  string
	tokens   []int64 // per engine, local + peers', before the pick
	requests []int64
	// exact is the fleet's true in-flight tokens per engine before the
	// pick: every replica's local load summed.
	exact []int64
}

func (d *diagnostics) sharedRandom() func() float64 {
	if d == nil {
		return nil
	}
	return d.random
}

func (d *diagnostics) beforePick(r *run, rq *request) {
	if d == nil {
		return
	}
	kr, ok := r.rts[rq.replica].(*kvrouter)
	if !ok {
		return
	}
	if sp := r.shared; sp != nil {
		for g, m := range sp.reps {
			if m.Queued() > 0 && sp.flush[g].IsZero() {
				d.unscheduled++
				break
			}
		}
	}
	p := pickTrace{at: r.now.Sub(r.start), replica: rq.replica, engine: -1}
	for _, id := range r.ids {
		tok, req, _ := kr.r.Load().Load(id)
		p.tokens, p.requests = append(p.tokens, tok), append(p.requests, req)
		var exact int64
		for _, rt := range r.rts {
			if k, ok := rt.(*kvrouter); ok {
				t, _ := k.r.Load().LocalLoad(id)
				exact += t
			}
		}
		p.exact = append(p.exact, exact)
	}
	d.picks = append(d.picks, p)
}

func (d *diagnostics) afterPick(r *run, rq *request, engine int) {
	if d == nil || len(d.picks) == 0 {
		return
	}
	p := &d.picks[len(d.picks)-1]
	p.engine = engine
	if rq.decision != nil {
		p.outcome = rq.decision.Outcome.String()
	}
}

// sync, when ideal, flushes every replica's queued decisions and load
// changes and applies them on the others at once.
func (d *diagnostics) sync(r *run) {
	if d == nil || !d.ideal || r.shared == nil {
		return
	}
	r.shared.syncAll(r.now)
}
