package sim

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/affinity"
	"github.com/kvroute/kvroute/cluster"
	"github.com/kvroute/kvroute/enginemetrics"
	"github.com/kvroute/kvroute/kvindex"
	"github.com/kvroute/kvroute/render"
	"github.com/kvroute/kvroute/telemetry"
	"github.com/kvroute/kvroute/tokenload"
)

// request is one routed request of a run.
type request struct {
	arrival
	replica int // the gateway replica that routed it
	engine  int
	// Lifecycle handles of the policy that routed it.
	decision      *kvroute.Decision
	inflight      *tokenload.Inflight
	prefillTokens int64         // dynamo: the prefill tokens it charged
	blocks        []kvindex.Key // dynamo: the active blocks it charged
	note          auditNote     // what the fleet held of its prompt at arrival
	// Outcome, filled when the engine reports.
	ttft     time.Duration
	finish   time.Time
	finished bool
	failed   bool
}

// router is one routing policy as the simulation drives it: pick an engine
// for a request, then hear about its first token and its end.
type router interface {
	pick(r *request) (int, error)
	firstToken(r *request)
	done(r *request)
	close()
}

// endpointIDs names the simulated engines as a gateway would see them.
func endpointIDs(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("10.0.%d.%d:8000", i/250, i%250+1)
	}
	return ids
}

// simModel is the model name the engines serve and the router keys by.
const simModel = "sim/llama-8b"

// kvrouter drives the real kvroute.Router: events disabled (the simulation
// feeds the index through kvevents itself), render disabled (prompts are
// supplied), the index clock on virtual time, and the affinity filter's
// peak prefill throughput calibrated to the engine model, as
// examples/calibrate would measure it on a real deployment. Everything else
// is kvroute.DefaultConfig, except that KVRoutePrefillOnly sets
// OpenRequestTokens to 0 (the baseline before open requests counted as
// load) KVRouteLMetric scores the LMetric way (kvlmetric.go),
// KVRouteCrowding runs the affinity filter's crowding rule without its
// bound on the extra prefill, KVRouteBounded keeps the bound however
// severe the crowding and KVRouteNoCrowding turns the rule off;
// Config.LoadTieTolerance is passed down to every one of them.
type kvrouter struct {
	r     *kvroute.Router
	eps   []kvroute.Endpoint
	index map[string]int
	req   kvroute.Request
	ctx   context.Context
	peers *peerScrape // nil unless Config.KVRoutePeerLoadFromMetrics
}

// peerScrape is a kvrouter's scrape of the engines' queues for
// Config.KVRoutePeerLoadFromMetrics, at most every interval of virtual
// time, before a pick.
type peerScrape struct {
	queue    func(i int) (waiting, running int)
	now      func() time.Time
	interval time.Duration
	last     time.Time
	sigs     map[string]enginemetrics.Signal
}

// scrapePeers turns Config.KVRoutePeerLoadFromMetrics on for k.
func (k *kvrouter) scrapePeers(queue func(i int) (waiting, running int), now func() time.Time, interval time.Duration) {
	k.peers = &peerScrape{queue: queue, now: now, interval: interval, sigs: map[string]enginemetrics.Signal{}}
}

// refreshPeers scrapes the queues when the interval has passed and gives
// the Router's tracker the other replicas' estimated load.
func (k *kvrouter) refreshPeers() {
	p := k.peers
	now := p.now()
	if !p.last.IsZero() && now.Sub(p.last) < p.interval {
		return
	}
	p.last = now
	for i, ep := range k.eps {
		w, r := p.queue(i)
		p.sigs[ep.ID] = enginemetrics.Signal{Waiting: w, Running: r}
	}
	t := k.r.Load()
	t.SetPeerLoads(enginemetrics.PeerLoads(p.sigs, t.LocalLoad))
}

func newKVRouter(cfg Config, ids []string, now func() time.Time, seed uint64, variant Policy, shared func() float64,
	join func(*kvindex.Index, *tokenload.Tracker) (*cluster.Replica, error)) (*kvrouter, error) {
	rc := kvroute.DefaultConfig()
	rc.Model = simModel
	rc.BlockSize = cfg.Fleet.BlockSize
	rc.Events.Enabled = new(false)
	rc.DisableRender = true
	rc.Index.SweepInterval = -1 // no wall-clock goroutine; expiry is enforced by Match on the virtual clock
	rc.Affinity.PeakPrefillThroughput = cfg.Fleet.PrefillTokensPerSecond
	rc.LoadTieTolerance = cfg.LoadTieTolerance
	var mu sync.Mutex
	rng := rand.New(rand.NewPCG(seed, 0x4b))
	random := func() float64 {
		mu.Lock()
		defer mu.Unlock()
		return rng.Float64()
	}
	if shared != nil { // tests: every replica draws from one source, as one router would
		random = shared
	}
	opts := kvroute.Options{Set: telemetry.Set{Clock: virtualClock{now: now}}, Random: random, NewClusterReplica: join}
	var lm *lmetricScoring
	switch variant {
	case KVRoutePrefillOnly:
		rc.OpenRequestTokens = new(int64(0))
	case KVRouteLMetric:
		lm = newLMetricScoring(cfg, &rc, &opts)
	default:
		crowdingVariant(&rc.Affinity, variant)
	}
	r, err := kvroute.New(context.Background(), rc, opts)
	if err != nil {
		return nil, err
	}
	if lm != nil {
		lm.ix = r.Index()
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
	return k, nil
}

// crowdingVariant sets the affinity filter's crowding rule of a kvroute
// experiment policy: KVRouteCrowding without its bound on the extra
// prefill, KVRouteBounded with the bound never lifted, KVRouteNoCrowding
// off. Other policies keep the defaults.
func crowdingVariant(a *affinity.Config, variant Policy) {
	switch variant {
	case KVRouteCrowding:
		a.CrowdingRatio = new(affinity.ChatCrowdingRatio)
		a.CrowdingMaxExtraPrefill = new(time.Duration(0))
	case KVRouteNoCrowding:
		a.CrowdingRatio = new(0.0)
	case KVRouteBounded:
		a.CrowdingUnboundRatio = new(0.0)
	}
}

func (k *kvrouter) pick(rq *request) (int, error) {
	if k.peers != nil {
		k.refreshPeers()
	}
	k.req.Prompts[0].TokenIDs = rq.prompt
	d, err := k.r.Pick(k.ctx, &k.req, k.eps)
	if err != nil {
		return 0, err
	}
	rq.decision = d
	return k.index[d.Endpoint.ID], nil
}

func (k *kvrouter) firstToken(rq *request) { rq.decision.FirstChunk() }
func (k *kvrouter) done(rq *request)       { rq.decision.Done(kvroute.DoneInfo{}) }
func (k *kvrouter) close()                 { k.r.Close() }

// roundRobin cycles through the engines.
type roundRobin struct{ next, n int }

func (r *roundRobin) pick(*request) (int, error) {
	i := r.next
	r.next = (r.next + 1) % r.n
	return i, nil
}
func (r *roundRobin) firstToken(*request) {}
func (r *roundRobin) done(*request)       {}
func (r *roundRobin) close()              {}

// leastLoad picks the engine with the fewest committed in-flight prompt
// tokens, counted with kvroute's own tokenload.Tracker (a request's prompt
// tokens count from dispatch to its first token). Cache-blind, it charges
// every request its full prompt. Ties go to the next engine in rotation.
type leastLoad struct {
	t     *tokenload.Tracker
	ids   []string
	start int
}

func newLeastLoad(ids []string) (*leastLoad, error) {
	t, err := tokenload.NewTracker(tokenload.Options{})
	if err != nil {
		return nil, err
	}
	return &leastLoad{t: t, ids: ids}, nil
}

func (l *leastLoad) pick(rq *request) (int, error) {
	best, bestTok := -1, int64(0)
	n := len(l.ids)
	for j := 0; j < n; j++ {
		i := (l.start + j) % n
		tok, _, _ := l.t.Load(l.ids[i])
		if best < 0 || tok < bestTok {
			best, bestTok = i, tok
		}
	}
	l.start = (l.start + 1) % n
	rq.inflight = l.t.Dispatch(l.ids[best], int64(len(rq.prompt)))
	return best, nil
}
func (l *leastLoad) firstToken(rq *request) { rq.inflight.FirstChunk() }
func (l *leastLoad) done(rq *request)       { rq.inflight.Done() }
func (l *leastLoad) close()                 {}

// keysOf returns the router block keys of tokens (full blocks).
func keysOf(dst []kvindex.Key, tokens []uint32, bs int) []kvindex.Key {
	return kvindex.Keys(dst, tokens, bs, &kvindex.KeyParams{Model: simModel})
}
