package sim

import (
	"context"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/kvindex"
	"github.com/kvroute/kvroute/render"
	"github.com/kvroute/kvroute/session"
	"github.com/kvroute/kvroute/telemetry"
)

// Session affinity in the simulation (package session). Two policies join
// the kvroute baseline on multi-turn traffic:
//
//   - KVRouteSession is the real kvroute.Router with session affinity: the
//     session scorer and profile (session.Config defaults, 10-minute TTL),
//     each request's session key the arrival's session.
//   - KVRouteSessionTTL is the same Router under Dynamo's session rule as
//     its router documents it (--router-session-affinity-ttl-secs): a
//     session is pinned to the worker of its first routed turn while the
//     session is younger than the idle TTL since its last turn, whatever
//     that worker's load; past it, the next turn is routed afresh. The TTL
//     is session.DefaultTTL, so only the rule differs: a hard pin against
//     kvroute's load-weighted preference.
//
// Both are experiment policies (not in AllPolicies); RunSessionStudy runs
// them against KVRoute on the multi-turn and agent workloads.
const (
	KVRouteSession    Policy = "kvroute-session"
	KVRouteSessionTTL Policy = "kvroute-dynamo-session-ttl"
)

// SessionPolicies are the session study's policies in report order.
var SessionPolicies = []Policy{KVRoute, KVRouteSession, KVRouteSessionTTL}

func init() { ExperimentPolicies = append(ExperimentPolicies, KVRouteSession, KVRouteSessionTTL) }

func (p Policy) isSessionPolicy() bool { return p == KVRouteSession || p == KVRouteSessionTTL }

// sessionRouter is a kvroute.Router with session affinity
// (KVRouteSession) or Dynamo's pin (KVRouteSessionTTL).
type sessionRouter struct {
	*kvrouter
	aff  *session.Affinity // KVRouteSession
	pins map[int]pin       // KVRouteSessionTTL: session → its worker and last turn
	ttl  time.Duration
	now  func() time.Time
	keys map[int]string
}

type pin struct {
	engine int
	last   time.Time
}

// newSessionRouter builds the Router as newKVRouter does (the same
// configuration as the KVRoute policy), with session affinity for
// KVRouteSession.
func newSessionRouter(cfg Config, ids []string, now func() time.Time, seed uint64, variant Policy) (*sessionRouter, error) {
	rc := kvroute.DefaultConfig()
	rc.Model = simModel
	rc.BlockSize = cfg.Fleet.BlockSize
	rc.Events.Enabled = new(false)
	rc.DisableRender = true
	rc.Index.SweepInterval = -1
	rc.Affinity.PeakPrefillThroughput = cfg.Fleet.PrefillTokensPerSecond
	var mu sync.Mutex
	rng := rand.New(rand.NewPCG(seed, 0x4b))
	random := func() float64 {
		mu.Lock()
		defer mu.Unlock()
		return rng.Float64()
	}
	clk := virtualClock{now: now}
	opts := kvroute.Options{Set: telemetry.Set{Clock: clk}, Random: random}
	s := &sessionRouter{ttl: session.DefaultTTL, now: now, keys: map[int]string{}}
	if variant == KVRouteSession {
		aff, err := session.New(session.Config{SaturationTokens: int64(2 * cfg.Fleet.PrefillTokensPerSecond)},
			session.Options{Set: telemetry.Set{Clock: clk}})
		if err != nil {
			return nil, err
		}
		s.aff = aff
		opts.Scorers = []kvroute.WeightedScorer{aff.Scorer()}
		opts.Profile = aff.Profile(nil)
	} else {
		s.pins = map[int]pin{}
	}
	r, err := kvroute.New(context.Background(), rc, opts)
	if err != nil {
		return nil, err
	}
	k := &kvrouter{r: r, index: map[string]int{}, ctx: context.Background()}
	for i, id := range ids {
		k.eps = append(k.eps, kvroute.Endpoint{ID: id})
		k.index[id] = i
	}
	if err := r.SetEndpoints(k.eps); err != nil {
		r.Close()
		return nil, err
	}
	k.req.Prompts = make([]render.Prompt, 1)
	s.kvrouter = k
	return s, nil
}

func (s *sessionRouter) pick(rq *request) (int, error) {
	if rq.session < 0 {
		s.req.Session = ""
		return s.kvrouter.pick(rq)
	}
	if s.aff != nil {
		key, ok := s.keys[rq.session]
		if !ok {
			key = "s" + strconv.Itoa(rq.session)
			s.keys[rq.session] = key
		}
		s.req.Session = key
		return s.kvrouter.pick(rq)
	}
	now := s.now()
	if p, ok := s.pins[rq.session]; ok && now.Sub(p.last) <= s.ttl {
		s.req.Prompts[0].TokenIDs = rq.prompt
		sel, err := s.r.Match(s.ctx, &s.req, s.eps)
		if err != nil {
			return 0, err
		}
		d, err := sel.Commit(p.engine) // the pinned worker, whatever its load
		sel.Release()
		if err != nil {
			return 0, err
		}
		rq.decision = d
		s.pins[rq.session] = pin{engine: p.engine, last: now}
		return p.engine, nil
	}
	e, err := s.kvrouter.pick(rq)
	if err == nil {
		s.pins[rq.session] = pin{engine: e, last: now}
	}
	return e, err
}

func (s *sessionRouter) close() {
	s.kvrouter.close()
	if s.aff != nil {
		s.aff.Close()
	}
}

// newSessionPolicy is newPolicy for the session policies.
func (r *run) newSessionPolicy(seed uint64, clock func() time.Time, subscribe func(*kvindex.Index) error) (router, error) {
	s, err := newSessionRouter(r.cfg, r.ids, clock, seed, r.policy)
	if err != nil {
		return nil, err
	}
	if err := subscribe(s.r.Index()); err != nil {
		s.close()
		return nil, err
	}
	return s, nil
}

// AgentWorkload is the agent-like workload: tool-call loops, short turns
// appended to a long context. It is the multi-turn shape with an agent's
// proportions: 2 agent kinds whose system prompts (instructions and tool
// definitions) are 6,144 tokens, 20 turns per session, each turn a
// 96-token tool result followed by a 48-token tool call, 500 ms (mean) of
// tool latency between turns.
func AgentWorkload() Workload {
	w := DefaultWorkload(MultiTurn)
	w.SystemPrompts, w.SystemTokens, w.UserTokens, w.Turns, w.ThinkTime = 2, 6144, 96, 20, 500*time.Millisecond
	w.OutputTokens = 48
	return w
}
