package kvroute

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/kvindex"
	"github.com/kvroute/kvroute/render"
)

// Two routers with different random sources, fed the same requests on the
// same idle fleet, break every tie alike, and the ties still spread evenly
// over the endpoints.
func TestTieBreakAgreesAcrossRoutersAndSpreads(t *testing.T) {
	a := testRouter(t, nil, Options{Random: lockedRand(1)})
	b := testRouter(t, nil, Options{Random: lockedRand(2)})
	eps := endpoints(4)
	per := map[string]int{}
	const n = 400
	for i := 0; i < n; i++ {
		p := prompt(5_000+i, 64*4+17)
		da, db := pick(t, a, p, eps), pick(t, b, p, eps)
		require.Equal(t, da.Endpoint.ID, db.Endpoint.ID, "request %d", i)
		per[da.Endpoint.ID]++
		da.Done(DoneInfo{}) // back to an idle fleet: every request ties on all four
		db.Done(DoneInfo{})
	}
	require.Len(t, per, 4)
	for id, c := range per {
		require.InDelta(t, n/4, c, n/8, "endpoint %s", id) // 100 expected; the hash is fixed, so this is deterministic
	}
}

// Requests that share a new prefix (nothing cached anywhere, shared
// decisions off) rank the endpoints alike while the loads are even, so they
// land on one endpoint; requests with other new prefixes spread.
func TestTieBreakKeepsOneNewPrefixTogether(t *testing.T) {
	r := testRouter(t, func(c *Config) { c.Speculative.Enabled = new(false) }, Options{})
	eps := endpoints(8)
	doc := prompt(77, 64*6)
	var first string
	for i := 0; i < 20; i++ {
		p := append(append([]uint32{}, doc...), prompt(900+i, 64+i)...) // one document, different questions
		d := pick(t, r, p, eps)
		if i == 0 {
			first = d.Endpoint.ID
		}
		require.Equal(t, first, d.Endpoint.ID, "question %d", i)
		d.Done(DoneInfo{})
	}
	seen := map[string]bool{}
	for i := 0; i < 20; i++ {
		d := pick(t, r, prompt(3_000+i, 64*6), eps)
		seen[d.Endpoint.ID] = true
		d.Done(DoneInfo{})
	}
	require.Greater(t, len(seen), 3, "different new prefixes rank the endpoints independently")
}

// The tie key is the first block beyond what any kept candidate holds: two
// requests that share a prefix cached on every endpoint and then differ rank
// the endpoints by their own first new block, not by the shared one.
func TestTieBreakKeysOnTheFirstNewBlock(t *testing.T) {
	r := testRouter(t, func(c *Config) { c.Speculative.Enabled = new(false) }, Options{})
	eps := endpoints(8)
	system := prompt(11, 64*3)
	for i, e := range eps {
		engineStores(t, r.Index(), e.ID, system, uint64(100*(i+1)))
	}
	seen := map[string]bool{}
	for i := 0; i < 24; i++ {
		p := append(append([]uint32{}, system...), prompt(4_000+i, 64*5)...)
		s, err := r.Match(context.Background(), &Request{Prompts: []render.Prompt{{TokenIDs: p}}}, eps)
		require.NoError(t, err)
		best, _ := s.Score()
		key, ok := s.tieKey(s.st.pass)
		require.True(t, ok)
		require.Equal(t, s.st.keys[3], key, "the first block no endpoint holds")
		seen[s.Candidate(best).Endpoint.ID] = true
		s.Release()
	}
	require.Greater(t, len(seen), 3, "the shared cached prefix does not pin every tie to one endpoint")
}

// A request without block keys (its prompt is shorter than a block) breaks
// its ties with Options.Random: reservoir sampling, a draw per tie.
func TestTieBreakWithoutKeysUsesRandom(t *testing.T) {
	for _, tc := range []struct {
		draw float64
		want int
	}{{0.99, 0}, {0.0, 2}} { // 0.99 keeps the first; 0 takes each newcomer
		r := testRouter(t, nil, Options{Random: seqRandom(tc.draw)})
		eps := endpoints(3)
		d := pick(t, r, prompt(1, 10), eps)
		require.Equal(t, eps[tc.want].ID, d.Endpoint.ID)
		d.Done(DoneInfo{})
	}
}

// tieRank orders IDs independently per key: over many keys every endpoint
// of four wins about a quarter of the time.
func TestTieRankIsUniform(t *testing.T) {
	ids := []string{"10.0.0.1:8000", "10.0.0.2:8000", "10.0.0.3:8000", "10.0.0.4:8000"}
	wins := make([]int, len(ids))
	rng := rand.New(rand.NewPCG(3, 4))
	const n = 40_000
	for i := 0; i < n; i++ {
		k := rng.Uint64()
		best, rank := 0, uint64(0)
		for j, id := range ids {
			if rk := tieRank(kvindex.Key(k), id); rk > rank {
				best, rank = j, rk
			}
		}
		wins[best]++
	}
	for j, w := range wins {
		require.InDelta(t, n/4, w, n/40, ids[j]) // ±10 %; the sequence is seeded, so this is deterministic
	}
}

// BenchmarkTieBreak times the scoring stage's choice among 64 candidates
// that all tie (an idle fleet, a prompt nobody holds: the worst case for
// the hashed tie-break), hashed against the reservoir draw it replaced, in
// one binary, and reports ns per tied candidate.
func BenchmarkTieBreak(b *testing.B) {
	const n = 64
	r, err := New(context.Background(), func() Config {
		c := DefaultConfig()
		c.Model, c.Events.Enabled, c.DisableRender = testModel, new(false), true
		return c
	}(), Options{Random: lockedRand(1)})
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	eps := endpoints(n)
	s, err := r.Match(context.Background(), &Request{Prompts: []render.Prompt{{TokenIDs: prompt(9, 2048)}}}, eps)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Release()
	s.Score()
	kept := s.st.pass
	if len(kept) != n {
		b.Fatalf("kept %d of %d", len(kept), n)
	}
	for _, i := range kept[1:] {
		if s.st.scores[i] != s.st.scores[kept[0]] {
			b.Fatal("candidates do not tie")
		}
	}
	reservoir := func() int {
		best, ties := -1, 0
		for _, i := range kept {
			ties++
			if best < 0 || r.random()*float64(ties) < 1 {
				best = i
			}
		}
		return best
	}
	for _, tc := range []struct {
		name string
		pick func() int
	}{{"hashed", func() int { best, _ := s.bestOf(kept); return best }}, {"reservoir", reservoir}} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			sink := 0
			for i := 0; i < b.N; i++ {
				sink += tc.pick()
			}
			if sink < 0 {
				b.Fatal("no pick")
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/tied-candidate")
		})
	}
}
