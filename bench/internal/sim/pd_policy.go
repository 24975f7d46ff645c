package sim

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/render"
	"github.com/kvroute/kvroute/telemetry"
)

// pdRouter is one P/D policy as the study drives it: route a request to
// a decode (or both-role) engine and, when it splits, a prefill engine
// (-1: prefilled where it decodes); then hear of its prefill's one token
// (split requests), its first token and its end.
type pdRouter interface {
	route(rq *pdReq) (decode, prefill int, err error)
	prefilled(rq *pdReq)
	firstToken(rq *pdReq)
	done(rq *pdReq)
	close()
}

// pdDeciderImpl says in the report which decider the kvroute-decider and
// always-disaggregated rows ran.
const pdDeciderImpl = "this study's stand-in for package disagg's Profile (pd_policy.go's pdProfile: the same split rule and prefill-load rule; its decode pick is kvroute's default pipeline over the decode pool, where package disagg scores the cached share and open requests), until that package is on main"

// pdSplitter is the decider the kvroute policies run as their Profile:
// what package disagg provides (its Profile: decode pick, decide, prefill
// pick). pdProfile is this study's stand-in with the same shape until that
// package is on main.
type pdSplitter interface {
	kvroute.Profile
}

// pdProfile picks the decode endpoint among the decode pool, then splits
// when the prompt tokens the index does not place on it reach threshold
// (every request when threshold < 0), picking the prefill endpoint among
// the prefill pool by the same pipeline (prefix cache and load); with
// maxQueue > 0 a request whose chosen prefill endpoint already has
// maxQueue prompt tokens in flight stays local (the prefill-load rule).
// A failed prefill pick leaves the request local. These are package
// disagg's decider semantics (NonCachedTokens, MaxPrefillQueueTokens);
// its decode pick scores differently (cached share and open requests).
type pdProfile struct {
	role      map[string]PDRole
	threshold int64
	maxQueue  int64
	load      func(id string) int64 // the Router's committed in-flight tokens
}

// Pick implements kvroute.Profile.
func (p *pdProfile) Pick(ctx context.Context, req *kvroute.Request, eps []kvroute.Endpoint, stages kvroute.Picker) (*kvroute.Decision, error) {
	var dec, pre []kvroute.Endpoint
	for _, e := range eps {
		switch p.role[e.ID] {
		case RoleDecode:
			dec = append(dec, e)
		case RolePrefill:
			pre = append(pre, e)
		default:
			dec, pre = append(dec, e), append(pre, e)
		}
	}
	d, err := stages.Pick(ctx, req, dec)
	if err != nil {
		return nil, err
	}
	if p.threshold >= 0 && int64(d.PromptTokens-d.CachedTokens) < p.threshold {
		return d, nil
	}
	pf, err := stages.Pick(ctx, req, pre)
	if err != nil {
		return d, nil
	}
	if p.maxQueue > 0 && p.load != nil && p.load(pf.Endpoint.ID)-pf.UncachedTokens >= p.maxQueue {
		pf.Done(kvroute.DoneInfo{})
		return d, nil
	}
	d.Roles = append(d.Roles, pf)
	return d, nil
}

// pdKVRoute drives the real kvroute.Router, configured as the routing
// simulation's kvroute policy (newKVRouter), with the P/D Profile for the
// split policies and the default single-role Profile for aggregated.
type pdKVRoute struct {
	r     *kvroute.Router
	eps   []kvroute.Endpoint
	index map[string]int
	req   kvroute.Request
}

func newPDKVRoute(cfg Config, ids []string, now func() time.Time, seed uint64, profile kvroute.Profile) (*pdKVRoute, error) {
	rc := kvroute.DefaultConfig()
	rc.Model = simModel
	rc.BlockSize = cfg.Fleet.BlockSize
	rc.Events.Enabled = new(false)
	rc.DisableRender = true
	rc.Index.SweepInterval = -1
	rc.Affinity.PeakPrefillThroughput = cfg.Fleet.PrefillTokensPerSecond
	var mu sync.Mutex
	rng := rand.New(rand.NewPCG(seed, 0x4b))
	opts := kvroute.Options{Set: telemetry.Set{Clock: virtualClock{now: now}}, Profile: profile, Random: func() float64 {
		mu.Lock()
		defer mu.Unlock()
		return rng.Float64()
	}}
	r, err := kvroute.New(context.Background(), rc, opts)
	if err != nil {
		return nil, err
	}
	k := &pdKVRoute{r: r, index: map[string]int{}}
	for i, id := range ids {
		k.eps = append(k.eps, kvroute.Endpoint{ID: id})
		k.index[id] = i
	}
	if err := r.SetEndpoints(k.eps); err != nil {
		r.Close()
		return nil, err
	}
	k.req.Prompts = make([]render.Prompt, 1)
	return k, nil
}

func (k *pdKVRoute) route(rq *pdReq) (int, int, error) {
	k.req.Prompts[0].TokenIDs = rq.prompt
	d, err := k.r.Pick(context.Background(), &k.req, k.eps)
	if err != nil {
		return 0, 0, err
	}
	rq.decision = d
	pre := -1
	if len(d.Roles) > 0 {
		pre = k.index[d.Roles[0].Endpoint.ID]
	}
	return k.index[d.Endpoint.ID], pre, nil
}

// prefilled: the Decision releases its prefill role with its own first
// chunk (kvroute.Decision.Roles).
func (k *pdKVRoute) prefilled(*pdReq)     {}
func (k *pdKVRoute) firstToken(rq *pdReq) { rq.decision.FirstChunk() }
func (k *pdKVRoute) done(rq *pdReq)       { rq.decision.Done(kvroute.DoneInfo{}) }
func (k *pdKVRoute) close()               { k.r.Close() }
