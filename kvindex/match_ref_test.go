package kvindex

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/telemetry"
)

// refState is what one endpoint holds of one prompt block in the randomized
// Match test: nothing, a set of tiers (confirmed), or a speculative entry.
type refState struct {
	tiers   []string // confirmed tiers; "gpu2" means GPU stored twice (a complex membership)
	spec    bool     // speculative only
	expired bool     // speculative and expired by the time Match runs
}

// refTierSets are the confirmed states the test draws from.
var refTierSets = [][]string{
	{"gpu"}, {"gpu"}, {"gpu"}, {"gpu2"}, {"cpu"}, {"storage"}, {"gpu", "cpu"},
	{"cpu_pinned", "lmcache"}, {"disk"}, {"gpu", "storage"},
}

// refWeights are the tier weights of the randomized test's index.
var refWeights = map[string]float64{"gpu": 1, "cpu": 0.5, "storage": 0.25, "lmcache": 0.1}

const refSpecWeight = 0.7

// refMatch is the straightforward definition of one candidate's match: walk
// its blocks from 0 until one it does not hold (live), summing per block
// the highest tier weight and counting tier classes.
func refMatch(name string, held []refState) EndpointMatch {
	e := EndpointMatch{Endpoint: name}
	for _, st := range held {
		switch {
		case st.spec && st.expired:
			return e
		case st.spec:
			e.Blocks++
			e.Speculative++
			e.Score += refSpecWeight
			continue
		case len(st.tiers) == 0:
			return e
		}
		e.Blocks++
		var w float64
		var gpu, cpu, storage, other bool
		for _, t := range st.tiers {
			switch t {
			case "gpu", "gpu2":
				w, gpu = max(w, 1), true
			case "cpu", "cpu_pinned":
				w, cpu = max(w, 0.5), true
			case "storage", "disk":
				w, storage = max(w, 0.25), true
			default:
				w, other = max(w, refWeights[t]), true
			}
		}
		e.Score += w
		for _, b := range []struct {
			on bool
			n  *int
		}{{gpu, &e.GPU}, {cpu, &e.CPU}, {storage, &e.Storage}, {other, &e.Other}} {
			if b.on {
				*b.n++
			}
		}
	}
	return e
}

// randomHoldings draws what one endpoint holds of an nBlocks prompt: a
// prefix of random length in random states, then scattered blocks.
func randomHoldings(rng *rand.Rand, nBlocks int) []refState {
	held := make([]refState, nBlocks)
	prefix := rng.IntN(nBlocks + 1)
	for j := range held {
		if j >= prefix && rng.IntN(10) >= 3 {
			continue
		}
		switch r := rng.IntN(20); {
		case r == 0:
			held[j] = refState{spec: true, expired: true}
		case r < 3:
			held[j] = refState{spec: true}
		default:
			held[j] = refState{tiers: refTierSets[rng.IntN(len(refTierSets))]}
		}
	}
	return held
}

// applyHoldings puts held into ix for endpoint ep: the whole prompt is
// stored on GPU (engine hashes 1…n), the other tiers are added by hash, and
// GPU copies that should not stay are removed; speculative entries go on
// blocks left unheld.
func applyHoldings(t *testing.T, ix *Index, ep string, prompt []uint32, keys []Key, held []refState) {
	t.Helper()
	require.NoError(t, ix.Store(ep, storeEv("m", 1, prompt)))
	var dropGPU []uint64
	for j, st := range held {
		h := uint64(1 + j)
		keepGPU := false
		for _, tier := range st.tiers {
			switch tier {
			case "gpu":
				keepGPU = true
			case "gpu2":
				keepGPU = true
				require.NoError(t, ix.Store(ep, &StoreEvent{EngineHashes: []uint64{h}, BlockSize: testBS, Tier: "gpu", Group: 0}))
			default:
				require.NoError(t, ix.Store(ep, &StoreEvent{EngineHashes: []uint64{h}, BlockSize: testBS, Tier: tier, Group: 0}))
			}
		}
		if !keepGPU {
			dropGPU = append(dropGPU, h)
		}
	}
	require.Equal(t, len(dropGPU), ix.Remove(ep, dropGPU, "gpu", 0))
	for j, st := range held {
		if st.spec {
			ttl := 10 * time.Second
			if st.expired {
				ttl = time.Second
			}
			ix.Speculate(ep, keys[j:j+1], ttl)
		}
	}
}

// TestMatchAgainstReference compares Match with refMatch on random
// holdings for candidate counts on both sides of the 64-candidate fast
// path, with duplicate and unknown candidates and endpoints that hold the
// prompt but are not candidates. With spread, non-candidate holders are
// registered between the candidates, so that up to 64 candidates have
// endpoint IDs spanning more than 64 (the bit-table path instead of the
// standard masks) and blocks' standard holders span more than 64 IDs.
func TestMatchAgainstReference(t *testing.T) {
	for _, n := range []int{1, 33, 63, 64, 65, 130, 300} {
		for seed := uint64(1); seed <= 4; seed++ {
			spread := seed%2 == 0
			t.Run(fmt.Sprintf("candidates=%d/seed=%d/spread=%v", n, seed, spread), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(uint64(n), seed))
				clk := newFakeClock()
				ix := newTestIndex(t, Config{TierWeights: refWeights, SpeculativeWeight: refSpecWeight}, Options{Set: telemetry.Set{Clock: clk}})
				nBlocks := 4 + rng.IntN(12)
				prompt := seq(1, nBlocks*testBS)
				keys := Keys(nil, prompt, testBS, &KeyParams{Model: "m"})

				model := map[string][]refState{}
				var cands []string
				for c := 0; c < n; c++ {
					if spread {
						for f := 0; f < 1+rng.IntN(3); f++ {
							name := fmt.Sprintf("10.5.%d.%d:8000", c, f)
							applyHoldings(t, ix, name, prompt, keys, randomHoldings(rng, nBlocks))
						}
					}
					name := fmt.Sprintf("10.3.%d.%d:8000", c/256, c%256)
					switch r := rng.IntN(20); {
					case r == 0 && c > 0: // a duplicate
						name = cands[rng.IntN(len(cands))]
					case r == 1: // unknown to the index
						name = fmt.Sprintf("ghost-%d", c)
					default:
						held := randomHoldings(rng, nBlocks)
						model[name] = held
						applyHoldings(t, ix, name, prompt, keys, held)
					}
					cands = append(cands, name)
				}
				for o := 0; o < 20; o++ { // holders that are not candidates
					name := fmt.Sprintf("10.4.0.%d:8000", o)
					applyHoldings(t, ix, name, prompt, keys, randomHoldings(rng, nBlocks))
				}
				clk.Advance(2 * time.Second) // the "expired" entries lapse

				check := func(out *MatchResult) {
					t.Helper()
					require.Equal(t, len(keys), out.Total)
					require.Len(t, out.Endpoints(), len(cands))
					require.Equal(t, len(cands), out.Len())
					eps := out.Endpoints()
					for c, name := range cands {
						want := refMatch(name, model[name])
						got := eps[c]
						require.InDelta(t, want.Score, got.Score, 1e-9, "candidate %d %s", c, name)
						got.Score = want.Score
						require.Equal(t, want, got, "candidate %d %s", c, name)
						// The single-field readers agree with the record.
						require.Equal(t, name, out.Endpoint(c))
						require.Equal(t, want.Blocks, out.Blocks(c), "candidate %d %s", c, name)
						require.InDelta(t, want.Score, out.Score(c), 1e-9, "candidate %d %s", c, name)
						require.Equal(t, want.Speculative, out.Speculative(c), "candidate %d %s", c, name)
						at := out.At(c)
						at.Score = want.Score
						require.Equal(t, want, at, "candidate %d %s", c, name)
					}
					// AddTo adds what the single-field readers give.
					blocks, scores := make([]int, out.Len()), make([]float64, out.Len())
					for c := range blocks {
						blocks[c], scores[c] = c, 0.5
					}
					out.AddTo(blocks, scores)
					for c := range cands {
						require.Equal(t, c+out.Blocks(c), blocks[c], "candidate %d", c)
						require.Equal(t, 0.5+out.Score(c), scores[c], "candidate %d", c)
					}
				}
				var out MatchResult
				for round := 0; round < 2; round++ { // the second uses the cached resolution
					ix.Match(keys, cands, &out)
					check(&out)
				}
				// Reusing the result for a reordered, then a shorter, list.
				rng.Shuffle(len(cands), func(i, j int) { cands[i], cands[j] = cands[j], cands[i] })
				ix.Match(keys, cands, &out)
				check(&out)
				cands = cands[:len(cands)/2+1]
				ix.Match(keys, cands, &out)
				check(&out)
				// The same slice rewritten in place (as a caller reusing its
				// buffer does) is resolved afresh, and results read after a
				// later rewrite still name the candidates Match saw.
				for i, j := 0, len(cands)-1; i < j; i, j = i+1, j-1 {
					cands[i], cands[j] = cands[j], cands[i]
				}
				ix.Match(keys, cands, &out)
				check(&out)
				saved := append([]string(nil), cands...)
				cands[0] = "rewritten-after-match"
				for c, name := range saved {
					require.Equal(t, name, out.Endpoint(c))
				}
				cands[0] = saved[0]
				out.Reset()
				require.Zero(t, out.Len())
				require.Empty(t, out.Endpoints())
				ix.Match(keys, cands, &out)
				check(&out)
			})
		}
	}
}

// TestMatchWideAllocatesNothing checks that a reused MatchResult keeps
// Match allocation-free above 64 candidates too.
func TestMatchWideAllocatesNothing(t *testing.T) {
	ix := newTestIndex(t, Config{})
	prompt := seq(1, 16*testBS)
	keys := Keys(nil, prompt, testBS, &KeyParams{Model: "m"})
	var cands []string
	for c := 0; c < 200; c++ {
		name := fmt.Sprintf("ep-%d", c)
		cands = append(cands, name)
		require.NoError(t, ix.Store(name, storeEv("m", 1, prompt[:(1+c%16)*testBS])))
	}
	ix.Speculate("ep-0", keys, 0)
	var out MatchResult
	ix.Match(keys, cands, &out)
	require.Equal(t, 16, out.Endpoints()[0].Blocks)
	require.Equal(t, 15, out.Endpoints()[0].Speculative)
	require.Equal(t, 16, out.Endpoints()[15].Blocks)
	require.Equal(t, 8, out.Endpoints()[199].Blocks)
	allocs := testing.AllocsPerRun(200, func() { ix.Match(keys, cands, &out) })
	require.Zero(t, allocs)
}
