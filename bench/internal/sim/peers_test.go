package sim

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/kvindex"
	"github.com/kvroute/kvroute/simengine"
	"github.com/kvroute/kvroute/telemetry"
)

// TestDynamoCost checks Dynamo's cost formula term by term with its
// defaults: credits = 1.0 × device + 0.75 × host + 0.25 × disk; prefill =
// max(in-flight + prompt − credits, 0); cost = 1.0 × prefill + active + new.
func TestDynamoCost(t *testing.T) {
	c := DefaultPeerConfig().Dynamo
	w := dynamoWorker{InflightPrefill: 10, Prompt: 40, Device: 20, Host: 8, Disk: 4, Active: 100, New: 12, Decay: 1}
	// credits = 20 + 6 + 1 = 27; prefill = 50 − 27 = 23; cost = 23 + 112.
	require.InDelta(t, 135.0, dynamoCost(c, w), 1e-12)
	// Credits never make the prefill term negative.
	w = dynamoWorker{Prompt: 10, Device: 10, Host: 30, Active: 5, New: 0, Decay: 1}
	require.InDelta(t, 5.0, dynamoCost(c, w), 1e-12)
	// prefill_load_scale weighs only the prefill term; the decay factor only the device credit.
	c.PrefillLoadScale = 2
	w = dynamoWorker{InflightPrefill: 4, Prompt: 32, Device: 32, Active: 7, New: 3, Decay: 0.5}
	require.InDelta(t, 2*(36-16)+10.0, dynamoCost(c, w), 1e-12)
	// A worker holding the whole prompt pays only its backlog and its decode blocks.
	c = DefaultPeerConfig().Dynamo
	require.InDelta(t, 4.0+7+3, dynamoCost(c, dynamoWorker{InflightPrefill: 4, Prompt: 32, Device: 32, Active: 7, New: 3, Decay: 1}), 1e-12)
}

func TestDynamoDecayAndSelect(t *testing.T) {
	// Backlogs 2, 6, 10 blocks: excess 0, 4, 8 over a request of 8 blocks
	// (500 tokens of 64, rounded up); decay 1 → factors 1, 1/1.5, 1/2.
	f := dynamoDecay(1, []float64{2, 6, 10}, 500, 64, nil)
	require.InDeltaSlice(t, []float64{1, 1 / 1.5, 0.5}, f, 1e-12)
	require.Equal(t, []float64{1, 1, 1}, dynamoDecay(0, []float64{2, 6, 10}, 500, 64, nil), "off by default")
	require.Equal(t, []float64{1, 1}, dynamoDecay(3, []float64{5, 5}, 500, 64, nil), "equal backlogs")

	rng := rand.New(rand.NewPCG(1, 2))
	require.Equal(t, 2, dynamoSelect([]float64{5, 4, 3, 9}, 0, rng), "temperature 0 picks the lowest cost")
	seen := map[int]int{}
	for i := 0; i < 1000; i++ {
		seen[dynamoSelect([]float64{3, 3, 9}, 0, rng)]++
	}
	require.Zero(t, seen[2])
	require.InDelta(t, 500, seen[0], 100, "ties are broken at random")
	// Softmax over normalised costs at temperature 1: weights e^0, e^-0.5, e^-1.
	seen = map[int]int{}
	for i := 0; i < 20000; i++ {
		seen[dynamoSelect([]float64{0, 5, 10}, 1, rng)]++
	}
	z := 1 + math.Exp(-0.5) + math.Exp(-1)
	require.InDelta(t, 20000/z, seen[0], 400)
	require.InDelta(t, 20000*math.Exp(-1)/z, seen[2], 400)
}

// TestDynamoPredictedOverlap: right after a decision, before any event, the
// side index makes the chosen worker the cheapest for the same prompt; when
// it expires the worker is cold again.
func TestDynamoPredictedOverlap(t *testing.T) {
	cfg := DefaultConfig(SharedPrefix, 1)
	now := time.Unix(1000, 0)
	clock := func() time.Time { return now }
	ids := endpointIDs(4)
	ix, err := kvindex.New(kvindex.Config{BlockSize: 64, SweepInterval: -1}, kvindex.Options{Set: telemetry.Set{Clock: virtualClock{now: clock}}})
	require.NoError(t, err)
	d := newDynamo(cfg, ids, ix, clock, 1)
	defer d.close()
	p := randTokens(rand.New(rand.NewPCG(3, 4)), 64*10)
	first := &request{arrival: arrival{prompt: p}}
	i, err := d.pick(first)
	require.NoError(t, err)
	first.engine = i
	d.firstToken(first)
	d.done(first) // no load left anywhere
	require.Equal(t, 10, d.predictedOverlap(i, now.UnixNano()))
	for k := 0; k < 5; k++ {
		rq := &request{arrival: arrival{prompt: p}}
		j, _ := d.pick(rq)
		require.Equal(t, i, j, "the predicted overlap credits the worker just chosen")
		rq.engine = j
		d.done(rq)
	}
	now = now.Add(cfg.Peers.Dynamo.PredictedTTL + time.Second)
	require.Zero(t, d.predictedOverlap(i, now.UnixNano()))
	// Load accounting: in-flight prefill until the first token, active blocks until done.
	rq := &request{arrival: arrival{prompt: p}}
	j, _ := d.pick(rq)
	rq.engine = j
	require.Equal(t, int64(640), d.prefill[j])
	require.Len(t, d.active[j], 10)
	d.firstToken(rq)
	require.Zero(t, d.prefill[j])
	d.done(rq)
	require.Empty(t, d.active[j])
}

// TestSGLangRule checks the cache_aware decision: imbalance needs both
// thresholds (max − min > 64 and max > 1.5 × min), a match counts only
// strictly above 0.3 of the prompt, and otherwise the least load wins.
func TestSGLangRule(t *testing.T) {
	c := DefaultPeerConfig().SGLang
	require.False(t, sglangImbalanced(c, []int{100, 164}), "difference 64 is not > 64")
	require.True(t, sglangImbalanced(c, []int{100, 165}))
	require.False(t, sglangImbalanced(c, []int{200, 290}), "290 is not > 1.5 × 200")
	require.True(t, sglangImbalanced(c, []int{200, 301}))
	require.True(t, sglangImbalanced(c, []int{0, 65}))
	p := make([]int, 3)
	i, why := sglangChoose(c, []int{70, 0, 3}, p, 2, 1000, 1000)
	require.Equal(t, 1, i)
	require.Equal(t, "imbalanced", why, "the least-loaded worker, whatever the match")
	i, why = sglangChoose(c, []int{1, 0, 3}, p, 2, 301, 1000)
	require.Equal(t, []any{2, "match"}, []any{i, why})
	i, why = sglangChoose(c, []int{1, 0, 3}, p, 2, 300, 1000)
	require.Equal(t, []any{1, "least-load"}, []any{i, why}, "a match of exactly 0.3 is not enough")
	i, why = sglangChoose(c, []int{1, 0, 3}, p, -1, 0, 1000)
	require.Equal(t, []any{1, "least-load"}, []any{i, why})
}

func TestPrefixTree(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	a := keysOf(nil, randTokens(r, 64*6), 64)
	b := keysOf(nil, append(randTokens(r, 0), randTokens(r, 64*4)...), 64)
	tr := newPrefixTree(3, 64)
	w, n := tr.match(a)
	require.Equal(t, []int{-1, 0}, []int{w, n})
	tr.insert(a[:4], 0, 10)
	tr.insert(a, 1, 20)
	tr.insert(b, 2, 30)
	w, n = tr.match(a)
	require.Equal(t, []int{1, 6}, []int{w, n}, "the deepest match")
	w, n = tr.match(a[:3])
	require.Equal(t, []int{1, 3}, []int{w, n}, "at a shared node, the most recent user")
	require.Equal(t, []int{4 * 64, 6 * 64, 4 * 64}, tr.size, "sizes in tokens")
	tr.insert(a[:2], 0, 40) // worker 0 refreshes the first two blocks
	tr.evict(2 * 64)
	require.Equal(t, []int{2 * 64, 2 * 64, 2 * 64}, tr.size)
	w, n = tr.match(a)
	require.Equal(t, []int{0, 2}, []int{w, n}, "LRU eviction kept each worker's most recent entries, roots first")
}

// TestSGLangMinLoadTiesByProcessed: when several workers share the least
// load, cache_aware's least-loaded pick takes the one it has sent the
// fewest requests so far, then the lowest index (the gateway's (load,
// processed_requests, index) order), so the idle workers take turns rather
// than the first of them taking every request.
func TestSGLangMinLoadTiesByProcessed(t *testing.T) {
	cfg := DefaultConfig(SharedPrefix, 1)
	now := func() time.Time { return simengine.DefaultStart }
	s := newSGLang(cfg, endpointIDs(3), nil, now)
	defer s.close()
	r := rand.New(rand.NewPCG(7, 8))
	s.loads[2] = 65 // imbalanced: 65 − 0 > 64 and 65 > 1.5 × 0
	var got []int
	for range 4 {
		rq := &request{arrival: arrival{prompt: randTokens(r, 64*4)}}
		i, err := s.pick(rq)
		require.NoError(t, err)
		rq.engine = i
		s.done(rq) // the least load is 0 again on workers 0 and 1
		got = append(got, i)
	}
	require.Equal(t, []int{0, 1, 0, 1}, got)
}

// TestSGLangEventsRule checks cache_aware's event-driven path (the gateway
// fed by the engines' KV events): any cached prefix wins, with no
// match-ratio threshold — the longest, ties to the lower load, then the
// smaller cache, then the last worker — and a prompt nobody holds goes to
// the least-loaded worker, not to the smallest cache.
func TestSGLangEventsRule(t *testing.T) {
	cfg := DefaultConfig(SharedPrefix, 1)
	now := func() time.Time { return simengine.DefaultStart }
	ids := endpointIDs(3)
	ix, err := kvindex.New(kvindex.Config{BlockSize: 64, SweepInterval: -1}, kvindex.Options{})
	require.NoError(t, err)
	s := newSGLang(cfg, ids, ix, now)
	defer s.close()
	r := rand.New(rand.NewPCG(9, 10))
	held := func(ep int, tokens []uint32) {
		hs := make([]uint64, len(tokens)/64)
		for i := range hs {
			hs[i] = uint64(i + 1)
		}
		require.NoError(t, ix.Store(ids[ep], &kvindex.StoreEvent{EngineHashes: hs, Tokens: tokens, BlockSize: 64, Model: simModel, Group: -1}))
		s.cachedDelta(ep, len(hs), false)
	}
	pick := func(prompt []uint32, loads, cached []int) int {
		t.Helper()
		copy(s.loads, loads)
		copy(s.cached, cached)
		i, err := s.pick(&request{arrival: arrival{prompt: prompt}})
		require.NoError(t, err)
		return i
	}
	p := randTokens(r, 64*10)
	held(0, p[:64])           // 1 of 10 blocks: below the approximate tree's 0.3
	held(1, p[:64*2])         // 2 of 10
	held(2, p[:64*2])         // 2 of 10
	q := randTokens(r, 64*10) // held by nobody
	require.Equal(t, 1, pick(p, []int{0, 2, 3}, []int{0, 900, 900}), "the longest prefix at the lower load, however short")
	require.Equal(t, 2, pick(p, []int{0, 3, 3}, []int{0, 900, 800}), "equal load: the smaller cache")
	require.Equal(t, 2, pick(p, []int{0, 3, 3}, []int{0, 900, 900}), "a full tie: the last")
	require.Equal(t, 1, pick(q, []int{2, 0, 1}, []int{0, 900, 900}), "no prefix held: the least load, not the smallest cache")
	require.Equal(t, 0, pick(p, []int{0, 70, 70}, []int{0, 900, 900}), "imbalanced: the least load")
}

// TestSGLangMissGoesToLeastLoad: a prompt whose match in the approximate
// tree is not above the threshold goes to the least-loaded worker, as the
// gateway's current cache_aware does, not to the worker with the smallest
// tree; either way the prompt is recorded for the worker chosen.
func TestSGLangMissGoesToLeastLoad(t *testing.T) {
	cfg := DefaultConfig(SharedPrefix, 1)
	now := func() time.Time { return simengine.DefaultStart }
	s := newSGLang(cfg, endpointIDs(3), nil, now)
	defer s.close()
	r := rand.New(rand.NewPCG(11, 12))
	s.tree.insert(keysOf(nil, randTokens(r, 64*8), 64), 1, 1)
	s.tree.insert(keysOf(nil, randTokens(r, 64*8), 64), 2, 1)
	copy(s.loads, []int{3, 0, 1}) // worker 0 has the smallest (empty) tree, worker 1 the least load
	p := randTokens(r, 64*8)
	i, err := s.pick(&request{arrival: arrival{prompt: p}})
	require.NoError(t, err)
	require.Equal(t, 1, i)
	w, n := s.tree.match(keysOf(nil, p, 64))
	require.Equal(t, []int{1, 8}, []int{w, n}, "the prompt is recorded for the worker chosen")
}

// TestDynamoDecayPerRequest: with overlap_score_credit_decay, a worker's
// device credit shrinks by 1 / (1 + decay × its prefill backlog above the
// least-loaded worker's ÷ this request's blocks), Dynamo's normalisation:
// the same backlog costs a short prompt's credit more than a long one's.
func TestDynamoDecayPerRequest(t *testing.T) {
	cfg := DefaultConfig(SharedPrefix, 1)
	cfg.Peers.Dynamo.OverlapCreditDecay = 1
	now := simengine.DefaultStart
	clock := func() time.Time { return now }
	ids := endpointIDs(3)
	ix, err := kvindex.New(kvindex.Config{BlockSize: 64, SweepInterval: -1}, kvindex.Options{})
	require.NoError(t, err)
	d := newDynamo(cfg, ids, ix, clock, 1)
	defer d.close()
	p := randTokens(rand.New(rand.NewPCG(13, 14)), 64*4) // 4 blocks, held by every worker
	for _, k := range keysOf(nil, p, 64) {
		for i := range ids {
			d.predicted[approxKey{k, int32(i)}] = now.Add(time.Hour).UnixNano()
		}
	}
	d.prefill[1], d.prefill[2] = 4*64, 8*64 // backlogs 0, 4 and 8 blocks
	_, err = d.pick(&request{arrival: arrival{prompt: p}})
	require.NoError(t, err)
	// Factors 1, 1/(1 + 4/4), 1/(1 + 8/4); cost = max(backlog + 4 − factor × 4, 0) + 4 new blocks.
	require.InDeltaSlice(t, []float64{4, 4 + 4 - 2 + 4, 8 + 4 - 4.0/3 + 4}, d.costs, 1e-9)
}

// TestApproxForgetsBeyondEngineCapacity: the approximate router remembers
// at most an engine's GPU blocks per endpoint, least recently sent
// forgotten first, as llm-d's approximate prefix scorer sizes its LRU from
// the engine's reported num_gpu_blocks; a prompt pushed out no longer
// counts as a prefix there, however recent within the TTL.
func TestApproxForgetsBeyondEngineCapacity(t *testing.T) {
	cfg := DefaultConfig(SharedPrefix, 1)
	cfg.Fleet.Engines, cfg.Fleet.NumGPUBlocks = 2, 8
	now := func() time.Time { return simengine.DefaultStart }
	// Endpoint 0 has the shorter queue and the emptier cache: it takes
	// every request (2 + 2 against at most 3 for endpoint 1's prefix).
	scrape := func(i int) (int, float64) { return 10 * i, float64(i) }
	a := newApprox(cfg, now, scrape, 1)
	r := rand.New(rand.NewPCG(15, 16))
	A, B, C := randTokens(r, 64*4), randTokens(r, 64*4), randTokens(r, 64*4)
	score := func(p []uint32) float64 {
		t.Helper()
		i, err := a.pick(&request{arrival: arrival{prompt: p}})
		require.NoError(t, err)
		require.Zero(t, i)
		return a.scores[0]
	}
	require.InDelta(t, 4, score(A), 1e-12)
	require.InDelta(t, 4, score(B), 1e-12)
	require.InDelta(t, 7, score(A), 1e-12, "A and B fill the 8 blocks")
	require.InDelta(t, 4, score(C), 1e-12) // pushes out B, the least recent
	require.InDelta(t, 7, score(A), 1e-12)
	require.InDelta(t, 4, score(B), 1e-12, "B was forgotten")
}
