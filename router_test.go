package kvroute

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/affinity"
	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/kvevents"
	"github.com/kvroute/kvroute/kvindex"
	"github.com/kvroute/kvroute/render"
	"github.com/kvroute/kvroute/telemetry"
)

const testModel = "test-model"

// fakeClock is a settable clock for speculative-entry expiry.
type fakeClock struct{ ns atomic.Int64 }

func (c *fakeClock) Now() time.Time      { return time.Unix(0, c.ns.Load()) }
func (c *fakeClock) Add(d time.Duration) { c.ns.Add(int64(d)) }

// The Router's one timer on its clock is its request table's expiry, a TTL
// of minutes away; fakeClock gives it the wall clock's, which never fires in
// a test, and is a telemetry.Clock for the Router's Now.
func (c *fakeClock) NewTimer(d time.Duration) telemetry.Timer   { return telemetry.Wall.NewTimer(d) }
func (c *fakeClock) NewTicker(d time.Duration) telemetry.Ticker { return telemetry.Wall.NewTicker(d) }
func (c *fakeClock) AfterFunc(d time.Duration, f func()) telemetry.Timer {
	return telemetry.Wall.AfterFunc(d, f)
}
func newFakeClock() *fakeClock {
	c := &fakeClock{}
	c.ns.Store(time.Unix(1_700_000_000, 0).UnixNano())
	return c
}
func seqRandom(vals ...float64) func() float64 {
	var i atomic.Int64
	return func() float64 { return vals[int(i.Add(1)-1)%len(vals)] }
}

// testRouter builds a Router without events or render (prompts are given).
func testRouter(t *testing.T, mutate func(*Config), opts Options) *Router {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Model = testModel
	cfg.Events.Enabled = new(false)
	cfg.DisableRender = true
	if mutate != nil {
		mutate(&cfg)
	}
	r, err := New(context.Background(), cfg, opts)
	require.NoError(t, err)
	t.Cleanup(r.Close)
	return r
}

func endpoints(n int) []Endpoint {
	eps := make([]Endpoint, n)
	for i := range eps {
		eps[i] = Endpoint{ID: fmt.Sprintf("10.0.0.%d:8000", i+1)}
	}
	return eps
}

// prompt returns n tokens unique to seed.
func prompt(seed, n int) []uint32 {
	t := make([]uint32, n)
	for i := range t {
		t[i] = uint32(seed*1_000_003 + i)
	}
	return t
}

// engineStores feeds the index what an engine's BlockStored would: every full
// block of tokens, cached on endpoint.
func engineStores(t *testing.T, ix *kvindex.Index, endpoint string, tokens []uint32, hashBase uint64) {
	t.Helper()
	bs := ix.BlockSize()
	n := len(tokens) / bs
	hashes := make([]uint64, n)
	for i := range hashes {
		hashes[i] = hashBase + uint64(i)
	}
	require.NoError(t, ix.Store(endpoint, &kvindex.StoreEvent{
		EngineHashes: hashes, Tokens: tokens[:n*bs], BlockSize: bs, Model: testModel, Group: -1,
	}))
}

func pick(t *testing.T, r *Router, tokens []uint32, eps []Endpoint) *Decision {
	t.Helper()
	d, err := r.Pick(context.Background(), &Request{Prompts: []render.Prompt{{TokenIDs: tokens}}}, eps)
	require.NoError(t, err)
	return d
}

func TestPrefixGroupStaysOnWarmEndpointWhileOtherTrafficSpreads(t *testing.T) {
	r := testRouter(t, func(c *Config) { c.Speculative.Enabled = new(false) }, Options{})
	eps := endpoints(4)
	shared := prompt(1, 2048)
	engineStores(t, r.Index(), eps[2].ID, shared, 1000)

	seen := map[string]int{}
	for i := 0; i < 40; i++ {
		// Group members: the shared context plus a unique question.
		p := append(append([]uint32{}, shared...), prompt(100+i, 200)...)
		d := pick(t, r, p, eps)
		require.Equal(t, eps[2].ID, d.Endpoint.ID, "request %d left the warm endpoint", i)
		require.True(t, d.UsedCache)
		require.Equal(t, affinity.OutcomeSticky, d.Outcome)
		require.Equal(t, 2048, d.CachedTokens)
		d.FirstChunk()
		d.Done(DoneInfo{})

		// Unrelated traffic is spread by load: keep it in flight so load grows.
		o := pick(t, r, prompt(5000+i, 1024), eps)
		require.False(t, o.UsedCache)
		seen[o.Endpoint.ID]++
	}
	require.Len(t, seen, 4, "unrelated traffic must spread over every endpoint: %v", seen)
	for id, n := range seen {
		require.InDelta(t, 10, n, 1, "endpoint %s got %d of 40 unrelated requests", id, n)
	}
}

func TestTTFTGateMovesTrafficOffOverloadedWarmEndpointExactlyAtPenalty(t *testing.T) {
	r := testRouter(t, func(c *Config) { c.Speculative.Enabled = new(false) }, Options{})
	eps := endpoints(2)
	warm, cold := eps[0], eps[1]
	shared := prompt(7, 64*20)
	engineStores(t, r.Index(), warm.ID, shared, 1)
	gate := int64(r.filter.GateTokens())
	require.Equal(t, int64(286_704), gate)

	// Committed load on the warm endpoint exactly at the penalty: still sticky.
	hold := r.load.Dispatch(warm.ID, gate)
	d := pick(t, r, shared, eps)
	require.Equal(t, warm.ID, d.Endpoint.ID)
	require.Equal(t, affinity.OutcomeSticky, d.Outcome)
	d.Done(DoneInfo{})

	// One token more: the gate breaks stickiness and the load scorer picks
	// the cold endpoint.
	extra := r.load.Dispatch(warm.ID, 1)
	d = pick(t, r, shared, eps)
	require.Equal(t, affinity.OutcomeLoadOverride, d.Outcome)
	require.Equal(t, cold.ID, d.Endpoint.ID)
	require.EqualValues(t, len(shared), d.UncachedTokens, "the cold endpoint computes the whole prompt")
	d.Done(DoneInfo{})

	// Once the warm endpoint's requests stream their first chunk, it is warm and free again.
	hold.FirstChunk()
	extra.FirstChunk()
	d = pick(t, r, shared, eps)
	require.Equal(t, warm.ID, d.Endpoint.ID)
	hold.Done()
	extra.Done()
	d.Done(DoneInfo{})
}

func TestExplorationPassesEveryCandidate(t *testing.T) {
	// 0.01 < 0.5: explore on the first draw; the tie-break draws come after.
	r := testRouter(t, func(c *Config) {
		c.Speculative.Enabled = new(false)
		c.Affinity.ExplorationProbability = 0.5
	}, Options{Random: seqRandom(0.01, 0.0, 0.0)})
	eps := endpoints(2)
	shared := prompt(3, 640)
	engineStores(t, r.Index(), eps[0].ID, shared, 1)
	// Make the warm endpoint the more loaded one so the scorer prefers the cold one once exploring.
	busy := r.load.Dispatch(eps[0].ID, 50_000)
	defer busy.Done()
	d := pick(t, r, shared, eps)
	require.Equal(t, affinity.OutcomeExploration, d.Outcome)
	require.Equal(t, eps[1].ID, d.Endpoint.ID)
}

func TestRenderFailureFallsBackToLoadAndIsCounted(t *testing.T) {
	defer leakcheck.Check(t)()
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = w.Write([]byte(`{"error":{"message":"boom","type":"InternalServerError","param":null,"code":500}}`))
	}))
	defer srv.Close()
	reg := prometheus.NewRegistry()
	cfg := DefaultConfig()
	cfg.Model = testModel
	cfg.Events.Enabled = new(false)
	cfg.Render.URL = srv.URL
	r, err := New(context.Background(), cfg, Options{Set: telemetry.Set{Registerer: reg}})
	require.NoError(t, err)
	defer r.Close()
	eps := endpoints(3)
	busy := r.load.Dispatch(eps[0].ID, 10_000)
	defer busy.Done()

	d, err := r.Pick(context.Background(), &Request{API: render.APICompletions,
		Body: []byte(`{"model":"test-model","prompt":"hello"}`)}, eps)
	require.NoError(t, err)
	require.Error(t, d.RenderErr)
	require.False(t, d.UsedCache)
	require.Zero(t, d.PromptTokens)
	require.NotEqual(t, eps[0].ID, d.Endpoint.ID, "load alone must avoid the busy endpoint")
	require.EqualValues(t, 1, calls.Load(), "a fixed render URL is not retried")
	require.Equal(t, 1.0, testutil.ToFloat64(r.met.renderFallbacks))
	require.Equal(t, 1.0, testutil.ToFloat64(r.met.decisions[decisionLoadOnly]))
	d.Done(DoneInfo{})
}

func TestSpeculativeEntriesKeepBackToBackPrefixTogetherThenExpire(t *testing.T) {
	clock := newFakeClock()
	r := testRouter(t, nil, Options{Set: telemetry.Set{Clock: clock}})
	eps := endpoints(4)
	shared := prompt(11, 4096)

	first := pick(t, r, shared, eps)
	require.False(t, first.UsedCache, "nothing is cached yet")
	// Before any BlockStored arrives, the same prefix follows the first decision,
	// even though that endpoint now carries the first request's load.
	second := pick(t, r, shared, eps)
	require.Equal(t, first.Endpoint.ID, second.Endpoint.ID)
	require.True(t, second.UsedCache)
	require.Equal(t, 4096, second.CachedTokens)
	first.Done(DoneInfo{})
	second.Done(DoneInfo{})

	// After the TTL with no confirmation, the prefix is cold everywhere again
	// and requests spread by load.
	clock.Add(kvindex.DefaultSpeculativeTTL + time.Millisecond)
	hold := r.load.Dispatch(first.Endpoint.ID, 100_000)
	defer hold.Done()
	third := pick(t, r, shared, eps)
	require.False(t, third.UsedCache)
	require.NotEqual(t, first.Endpoint.ID, third.Endpoint.ID)
}

func TestLoadReleasedOnFirstChunkAndDoneExactlyOnce(t *testing.T) {
	r := testRouter(t, func(c *Config) { c.Speculative.Enabled = new(false) }, Options{})
	eps := endpoints(1)
	d := pick(t, r, prompt(1, 1000), eps)
	tok, req, _ := r.load.Load(eps[0].ID)
	require.EqualValues(t, 1000, tok)
	require.EqualValues(t, 1, req)
	d.FirstChunk()
	d.FirstChunk()
	tok, req, _ = r.load.Load(eps[0].ID)
	require.EqualValues(t, 0, tok)
	require.EqualValues(t, 1, req)
	d.Done(DoneInfo{})
	d.Done(DoneInfo{Err: fmt.Errorf("late abort")})
	tok, req, _ = r.load.Load(eps[0].ID)
	require.EqualValues(t, 0, tok)
	require.EqualValues(t, 0, req)

	// Done without FirstChunk releases everything.
	d = pick(t, r, prompt(2, 500), eps)
	d.Done(DoneInfo{})
	tok, req, _ = r.load.Load(eps[0].ID)
	require.Zero(t, tok)
	require.Zero(t, req)
}

func TestLoadAccountingConcurrentWithEndpointRemoval(t *testing.T) {
	r := testRouter(t, func(c *Config) { c.Speculative.Enabled = new(false) }, Options{})
	eps := endpoints(4)
	require.NoError(t, r.SetEndpoints(eps))
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				d, err := r.Pick(context.Background(), &Request{Prompts: []render.Prompt{{TokenIDs: prompt(g*1000+i, 300)}}}, eps)
				if err != nil {
					t.Error(err)
					return
				}
				var inner sync.WaitGroup
				inner.Add(2)
				go func() { defer inner.Done(); d.FirstChunk() }()
				go func() { defer inner.Done(); d.Done(DoneInfo{}) }()
				inner.Wait()
			}
		}(g)
	}
	// Remove and re-add an endpoint while requests flow.
	for i := 0; i < 50; i++ {
		require.NoError(t, r.SetEndpoints(eps[1:]))
		require.NoError(t, r.SetEndpoints(eps))
	}
	wg.Wait()
	for _, e := range eps {
		tok, req, _ := r.load.Load(e.ID)
		require.Zero(t, tok, e.ID)
		require.Zero(t, req, e.ID)
	}
}

func TestPickErrors(t *testing.T) {
	r := testRouter(t, nil, Options{})
	_, err := r.Pick(context.Background(), &Request{}, nil)
	require.ErrorIs(t, err, ErrNoEndpoints)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = r.Pick(ctx, &Request{}, endpoints(2))
	require.ErrorIs(t, err, context.Canceled)
	// Rendering disabled and no prompts: routed by load, counted.
	d, err := r.Pick(context.Background(), &Request{}, endpoints(2))
	require.NoError(t, err)
	require.ErrorIs(t, d.RenderErr, errRenderDisabled)
	d.Done(DoneInfo{})
}

func TestConfigValidationAndStrictDecoding(t *testing.T) {
	cfg, err := LoadConfig(strings.NewReader(`{"model":"m","events":{"eventsPort":6000},"affinity":{"affinityThreshold":0.6}}`))
	require.NoError(t, err)
	require.Equal(t, 6000, cfg.Events.EventsPort)
	require.Equal(t, kvevents.DefaultReplayPort, cfg.Events.ReplayPort, "absent keys keep their defaults")
	require.Equal(t, 0.6, *cfg.Affinity.AffinityThreshold)
	require.Equal(t, render.DefaultAttemptTimeout, *cfg.Render.AttemptTimeout)

	for name, doc := range map[string]string{
		"unknown top-level key":   `{"modle":"m"}`,
		"unknown nested key":      `{"events":{"prot":1}}`,
		"misplaced key":           `{"index":{"speculativeIndexing":true}}`,
		"unknown affinity key":    `{"affinity":{"threshold":0.5}}`,
		"out-of-range port":       `{"events":{"eventsPort":70000}}`,
		"invalid selector":        `{"events":{"selector":"a in (b"}}`,
		"negative load weight":    `{"loadWeight":-1}`,
		"invalid affinity":        `{"affinity":{"affinityThreshold":1.5}}`,
		"trailing data":           `{} {}`,
		"negative speculativeTTL": `{"speculative":{"ttl":-5}}`,
	} {
		_, err := LoadConfig(strings.NewReader(doc))
		require.ErrorIs(t, err, ErrInvalidConfig, name)
	}
	_, err = New(context.Background(), Config{BlockSize: -1}, Options{})
	require.ErrorIs(t, err, ErrInvalidConfig)
}

func TestRouterMetricsPredictedShare(t *testing.T) {
	reg := prometheus.NewRegistry()
	r := testRouter(t, func(c *Config) { c.Speculative.Enabled = new(false) }, Options{Set: telemetry.Set{Registerer: reg}})
	eps := endpoints(2)
	shared := prompt(9, 640)
	engineStores(t, r.Index(), eps[1].ID, shared, 1)
	d := pick(t, r, append(append([]uint32{}, shared...), prompt(10, 100)...), eps)
	d.Done(DoneInfo{})
	mfs, err := reg.Gather()
	require.NoError(t, err)
	sums := map[string]float64{}
	for _, mf := range mfs {
		if strings.HasPrefix(mf.GetName(), "llm_d_epp_prefix_") {
			sums[mf.GetName()] = mf.GetMetric()[0].GetHistogram().GetSampleSum()
		}
	}
	require.Equal(t, 640.0, sums["llm_d_epp_prefix_predicted_cached_tokens"])
	require.Equal(t, 740.0, sums["llm_d_epp_prefix_prompt_tokens"])
}

// preferScorer scores one endpoint 1 and every other 0, and records what it saw.
type preferScorer struct {
	id     string
	mu     sync.Mutex
	blocks map[string]int
}

func (s *preferScorer) Score(sel *Selection, i int) float64 {
	c := sel.Candidate(i)
	s.mu.Lock()
	s.blocks[c.Endpoint.ID] = c.Match.Blocks
	s.mu.Unlock()
	if c.Endpoint.ID == s.id {
		return 7 // clamped to 1
	}
	return 0
}

func TestWeightedScorersJoinTheLoadScore(t *testing.T) {
	eps := endpoints(3)
	ps := &preferScorer{id: eps[2].ID, blocks: map[string]int{}}
	r := testRouter(t, func(c *Config) { c.Speculative.Enabled = new(false) },
		Options{Scorers: []WeightedScorer{{Scorer: ps, Weight: 0.5}}})
	engineStores(t, r.Index(), eps[1].ID, prompt(5, 64*3), 1)
	// The preferred endpoint carries more load than the others; its extra 0.5
	// outweighs the load difference (10,000 tokens ≈ 0.0024 of the score, plus
	// OpenRequestTokens for the open request).
	busy := r.load.Dispatch(eps[2].ID, 10_000)
	defer busy.Done()
	d := pick(t, r, prompt(99, 640), eps) // unrelated prompt: no cache information
	require.Equal(t, eps[2].ID, d.Endpoint.ID)
	require.InDelta(t, 1+0.5-float64(10_000+*DefaultConfig().OpenRequestTokens+640)/float64(DefaultConfig().QueueThresholdTokens), d.Score, 1e-9)
	d.Done(DoneInfo{})
	require.Equal(t, map[string]int{eps[0].ID: 0, eps[1].ID: 0, eps[2].ID: 0}, ps.blocks)

	// Scorers run after the affinity filter, on the candidates it kept, and see
	// each one's match for this request: here only the warm endpoint.
	clear(ps.blocks)
	d = pick(t, r, prompt(5, 64*3), eps)
	d.Done(DoneInfo{})
	require.Equal(t, eps[1].ID, d.Endpoint.ID)
	require.Equal(t, map[string]int{eps[1].ID: 3}, ps.blocks)
}
