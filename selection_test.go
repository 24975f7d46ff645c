package kvroute

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/affinity"
	"github.com/kvroute/kvroute/render"
	"github.com/kvroute/kvroute/telemetry"
	"github.com/kvroute/kvroute/tokenload"
)

// lockedRand is a seeded, goroutine-safe source of Options.Random.
func lockedRand(seed uint64) func() float64 {
	var mu sync.Mutex
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	return func() float64 {
		mu.Lock()
		defer mu.Unlock()
		return rng.Float64()
	}
}

// The staged Pick makes exactly the decisions of the single-function Pick it
// replaced: two routers with the same configuration, index contents, load,
// clock and random draws are driven through the same randomized sequence of
// requests (shared prefixes, several prompts, exploration, the TTFT gate,
// speculative entries expiring, requests finishing in random order), one
// with Pick and one with legacyPick, and every Decision must agree.
func TestStagedPickMatchesMonolithicPick(t *testing.T) {
	clockA, clockB := newFakeClock(), newFakeClock()
	mutate := func(c *Config) { c.Affinity.ExplorationProbability = 0.05 }
	a := testRouter(t, mutate, Options{Set: telemetry.Set{Clock: clockA}, Random: lockedRand(7)})
	b := testRouter(t, mutate, Options{Set: telemetry.Set{Clock: clockB}, Random: lockedRand(7)})
	eps := endpoints(8)
	families := make([][]uint32, 6)
	for f := range families {
		families[f] = prompt(100+f, 64*(4+f*3))
		for _, r := range []*Router{a, b} {
			engineStores(t, r.Index(), eps[f%len(eps)].ID, families[f][:64*(2+f)], uint64(1+f*100))
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var open [][2]*Decision
	for i := 0; i < 600; i++ {
		var prompts []render.Prompt
		for n := 1 + rng.IntN(2); n > 0; n-- {
			fam := families[rng.IntN(len(families))]
			p := append(append([]uint32{}, fam[:rng.IntN(len(fam)+1)]...), prompt(10_000+i, rng.IntN(300))...)
			prompts = append(prompts, render.Prompt{TokenIDs: p})
		}
		req := &Request{Prompts: prompts}
		da, err := a.Pick(context.Background(), req, eps)
		require.NoError(t, err)
		db, err := b.legacyPick(context.Background(), req, eps)
		require.NoError(t, err)
		require.Equal(t, db.Endpoint, da.Endpoint, "request %d", i)
		require.Equal(t, [4]int64{int64(db.PromptTokens), int64(db.CachedTokens), db.UncachedTokens, int64(db.Outcome)},
			[4]int64{int64(da.PromptTokens), int64(da.CachedTokens), da.UncachedTokens, int64(da.Outcome)}, "request %d", i)
		require.Equal(t, db.UsedCache, da.UsedCache, "request %d", i)
		require.Equal(t, db.Score, da.Score, "request %d", i)
		open = append(open, [2]*Decision{da, db})
		// Finish some open requests, in random order, on both routers alike.
		for len(open) > 0 && rng.IntN(3) > 0 {
			k := rng.IntN(len(open))
			if rng.IntN(2) == 0 {
				open[k][0].FirstChunk()
				open[k][1].FirstChunk()
			}
			open[k][0].Done(DoneInfo{})
			open[k][1].Done(DoneInfo{})
			open = append(open[:k], open[k+1:]...)
		}
		if rng.IntN(50) == 0 {
			step := time.Duration(rng.IntN(3)) * time.Second
			clockA.Add(step)
			clockB.Add(step)
		}
	}
	for _, e := range eps {
		ta, ra, _ := a.load.Load(e.ID)
		tb, rb, _ := b.load.Load(e.ID)
		require.Equal(t, [2]int64{tb, rb}, [2]int64{ta, ra}, e.ID)
	}
}

// A host runs the stages itself, reads every candidate's results and
// commits a candidate of its own choosing.
func TestSelectionStagesOneAtATime(t *testing.T) {
	r := testRouter(t, nil, Options{})
	eps := endpoints(3)
	shared := prompt(4, 64*10)
	engineStores(t, r.Index(), eps[1].ID, shared[:64*9], 1)
	busy := r.load.Dispatch(eps[2].ID, 5000)
	defer busy.Done()

	s, err := r.Match(context.Background(), &Request{Prompts: []render.Prompt{{TokenIDs: append(shared, 1, 2, 3)}}}, eps)
	require.NoError(t, err)
	defer s.Release()
	require.Equal(t, 3, s.Len())
	require.Equal(t, s.Request().Prompts[0].TokenIDs[:3], shared[:3])
	require.Equal(t, eps[1], s.Candidate(1).Endpoint)
	require.Equal(t, 64*10+3, s.promptTokens)
	require.Equal(t, 10, s.total)
	require.True(t, s.usedCache)
	require.NoError(t, s.renderErr)
	require.Equal(t, 9, s.Candidate(1).Match.Blocks)
	require.Equal(t, 9, s.Candidate(1).Match.GPU)
	require.Zero(t, s.Candidate(0).Match.Blocks)
	require.EqualValues(t, 64+3, s.Candidate(1).UncachedTokens)
	require.EqualValues(t, 64*10+3, s.Candidate(0).UncachedTokens)
	require.EqualValues(t, 5000, s.Candidate(2).InFlightTokens)
	require.EqualValues(t, 1, s.Candidate(2).OpenRequests)
	require.False(t, s.Candidate(1).Kept, "not filtered yet")

	kept, outcome := s.Filter()
	require.Equal(t, affinity.OutcomeSticky, outcome)
	require.Equal(t, []int{1}, kept)
	require.True(t, s.Candidate(1).Kept)
	require.False(t, s.Candidate(0).Kept)
	best, score := s.Score()
	require.Equal(t, 1, best)
	require.Equal(t, score, s.Candidate(1).Score)
	require.Zero(t, s.Candidate(0).Score, "a filtered-out candidate has no score")

	// The host overrides the choice: the commit goes to candidate 0.
	_, err = s.Commit(7)
	require.Error(t, err)
	d, err := s.Commit(0)
	require.NoError(t, err)
	require.Equal(t, eps[0], d.Endpoint)
	require.Zero(t, d.CachedTokens)
	require.EqualValues(t, 64*10+3, d.UncachedTokens)
	require.Zero(t, d.Score, "candidate 0 was not scored")
	tok, reqs, _ := r.load.Load(eps[0].ID)
	require.Equal(t, [2]int64{64*10 + 3, 1}, [2]int64{tok, reqs})
	_, err = s.Commit(0)
	require.ErrorIs(t, err, ErrCommitted)
	d.Done(DoneInfo{})

	// Its speculative entries make candidate 0 warm for the prefix now.
	d2 := pick(t, r, shared, endpoints(1))
	require.Equal(t, 640, d2.CachedTokens)
	d2.Done(DoneInfo{})
}

// Match then Commit, skipping Filter and Score, is a valid (load-only) use.
func TestSelectionCommitWithoutFilterOrScore(t *testing.T) {
	r := testRouter(t, func(c *Config) { c.Speculative.Enabled = new(false) }, Options{})
	eps := endpoints(2)
	s, err := r.Match(context.Background(), &Request{Prompts: []render.Prompt{{TokenIDs: prompt(1, 100)}}}, eps)
	require.NoError(t, err)
	d, err := s.Commit(1)
	s.Release()
	require.NoError(t, err)
	require.Equal(t, affinity.OutcomeNotApplicable, d.Outcome)
	require.Equal(t, eps[1], d.Endpoint)
	d.Done(DoneInfo{})
	tok, reqs, _ := r.load.Load(eps[1].ID)
	require.Zero(t, tok+reqs)
}

func TestRequestIDAddressesLoadExactlyOnce(t *testing.T) {
	reg := prometheus.NewRegistry()
	r := testRouter(t, func(c *Config) { c.Speculative.Enabled = new(false) }, Options{Set: telemetry.Set{Registerer: reg}})
	eps := endpoints(2)
	load := func(i int) [2]int64 {
		tok, reqs, _ := r.load.Load(eps[i].ID)
		return [2]int64{tok, reqs}
	}
	ids := func(outcome string) float64 {
		v, _ := gathered(t, reg, "kvroute_tokenload_request_ids_total", outcome)
		return v
	}
	one := endpoints(1)
	d, err := r.Pick(context.Background(), &Request{ID: "req-1", Prompts: []render.Prompt{{TokenIDs: prompt(1, 1000)}}}, one)
	require.NoError(t, err)
	require.Equal(t, [2]int64{1000, 1}, load(0))
	require.Equal(t, 1, r.Requests().Len())

	// The same ID while in flight is refused at Pick, and nothing changes.
	_, err = r.Pick(context.Background(), &Request{ID: "req-1", Prompts: []render.Prompt{{TokenIDs: prompt(2, 500)}}}, one)
	require.ErrorIs(t, err, tokenload.ErrDuplicateRequestID)
	require.Equal(t, [2]int64{1000, 1}, load(0))
	require.Equal(t, 1.0, ids(tokenload.IDDuplicate))

	require.Same(t, d, r.Decision("req-1"), "the ID finds the Decision itself")
	r.Decision("req-1").FirstChunk()
	r.Decision("req-1").FirstChunk()
	require.Equal(t, [2]int64{0, 1}, load(0))
	d.FirstChunk() // the Decision's hook and the ID's are one and the same
	r.Decision("req-1").Done(DoneInfo{})
	require.Equal(t, [2]int64{0, 0}, load(0))
	require.Nil(t, r.Decision("req-1"), "after Done the ID is unknown")
	d.Done(DoneInfo{})
	r.Decision("never-seen").FirstChunk()
	require.Equal(t, [2]int64{0, 0}, load(0))
	require.Equal(t, 2.0, ids(tokenload.IDUnknown))
	require.Zero(t, r.Requests().Len())

	// Decision.Done frees the ID too, so it can be used again.
	d, err = r.Pick(context.Background(), &Request{ID: "req-1", Prompts: []render.Prompt{{TokenIDs: prompt(3, 300)}}}, one)
	require.NoError(t, err)
	d.Done(DoneInfo{})
	require.Zero(t, r.Requests().Len())
	require.Nil(t, r.Decision("req-1"))
	require.Equal(t, [2]int64{0, 0}, load(0))

	// The endpoint leaves the pool while its request is in flight; the late
	// Done by ID touches only the orphaned counters, not the re-added ones.
	require.NoError(t, r.SetEndpoints(eps))
	_, err = r.Pick(context.Background(), &Request{ID: "req-2", Prompts: []render.Prompt{{TokenIDs: prompt(4, 700)}}}, eps[1:])
	require.NoError(t, err)
	require.NoError(t, r.SetEndpoints(eps[:1]))
	require.NoError(t, r.SetEndpoints(eps))
	fresh := r.load.Dispatch(eps[1].ID, 40)
	r.Decision("req-2").Done(DoneInfo{})
	require.Equal(t, [2]int64{40, 1}, load(1))
	fresh.Done()

	// An over-long ID is refused.
	_, err = r.Pick(context.Background(), &Request{ID: string(make([]byte, tokenload.MaxRequestIDBytes+1)),
		Prompts: []render.Prompt{{TokenIDs: prompt(5, 10)}}}, one)
	require.ErrorIs(t, err, tokenload.ErrInvalidRequestID)
	require.Equal(t, [2]int64{0, 0}, load(0))
}

// Hooks of one request arrive from different goroutines, by ID and through
// the Decision at once; every counter ends at zero.
func TestRequestIDConcurrentHooks(t *testing.T) {
	r := testRouter(t, func(c *Config) { c.Speculative.Enabled = new(false) }, Options{})
	eps := endpoints(4)
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				id := "g" + string(rune('a'+g)) + "-" + time.Duration(i).String()
				d, err := r.Pick(context.Background(), &Request{ID: id, Prompts: []render.Prompt{{TokenIDs: prompt(g*1000+i, 300)}}}, eps)
				if err != nil {
					t.Error(err)
					return
				}
				var inner sync.WaitGroup
				inner.Add(4)
				go func() { defer inner.Done(); r.Decision(id).FirstChunk() }()
				go func() { defer inner.Done(); r.Decision(id).Done(DoneInfo{}) }()
				go func() { defer inner.Done(); d.FirstChunk() }()
				go func() { defer inner.Done(); d.Done(DoneInfo{}) }()
				inner.Wait()
			}
		}(g)
	}
	wg.Wait()
	for _, e := range eps {
		tok, reqs, _ := r.load.Load(e.ID)
		require.Zero(t, tok+reqs, e.ID)
	}
	require.Zero(t, r.Requests().Len())
}
