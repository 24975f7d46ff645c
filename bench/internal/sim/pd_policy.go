package sim

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/disagg"
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
const pdDeciderImpl = "package disagg's Profile as the real kvroute.Router's profile step (decode pick by cached share and decode load in output tokens and requests, the threshold and, when on, the cost rule, then the prefill pick by the router's own scorers); always-disaggregated is the same Profile with nonCachedTokens −1 and no cost rule"

// pdKVRoute drives the real kvroute.Router, configured as the routing
// simulation's kvroute policy (newKVRouter), with package disagg's Profile
// for the split policies and the default single-role Profile for
// aggregated. Each request's body names its answer's length (max_tokens),
// which the Profile charges its decode endpoint.
type pdKVRoute struct {
	r       *kvroute.Router
	profile *disagg.Profile // nil for aggregated
	eps     []kvroute.Endpoint
	index   map[string]int
	req     kvroute.Request
}

func newPDKVRoute(cfg Config, ids []string, roles []PDRole, now func() time.Time, seed uint64, profile *disagg.Profile, maxTokens int) (*pdKVRoute, error) {
	rc := kvroute.DefaultConfig()
	rc.Model = simModel
	rc.BlockSize = cfg.Fleet.BlockSize
	rc.Events.Enabled = new(false)
	rc.DisableRender = true
	rc.Index.SweepInterval = -1
	rc.Affinity.PeakPrefillThroughput = cfg.Fleet.PrefillTokensPerSecond
	var mu sync.Mutex
	rng := rand.New(rand.NewPCG(seed, 0x4b))
	opts := kvroute.Options{Set: telemetry.Set{Clock: virtualClock{now: now}}, Random: func() float64 {
		mu.Lock()
		defer mu.Unlock()
		return rng.Float64()
	}}
	if profile != nil {
		opts.Profile = profile
	}
	r, err := kvroute.New(context.Background(), rc, opts)
	if err != nil {
		return nil, err
	}
	k := &pdKVRoute{r: r, profile: profile, index: map[string]int{}}
	for i, id := range ids {
		k.eps = append(k.eps, kvroute.Endpoint{ID: id, Role: string(roles[i])})
		k.index[id] = i
	}
	if err := r.SetEndpoints(k.eps); err != nil {
		r.Close()
		return nil, err
	}
	k.req.Prompts = make([]render.Prompt, 1)
	k.req.Body = []byte(fmt.Sprintf(`{"model":%q,"max_tokens":%d}`, simModel, maxTokens))
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

// prefilled: the prefiller's one token has come back, which ends its part
// (its Decision is PrefillOnly), as the decode pod's sidecar sees it.
func (k *pdKVRoute) prefilled(rq *pdReq) {
	for _, o := range rq.decision.Roles {
		o.FirstChunk()
	}
}
func (k *pdKVRoute) firstToken(rq *pdReq) { rq.decision.FirstChunk() }
func (k *pdKVRoute) done(rq *pdReq)       { rq.decision.Done(kvroute.DoneInfo{}) }
func (k *pdKVRoute) close() {
	k.r.Close()
	if k.profile != nil {
		k.profile.Close()
	}
}
