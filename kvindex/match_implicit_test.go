package kvindex

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/telemetry"
)

// TestMatchImplicitArraysAgainstReference compares Match with refMatch
// where the prompt's blocks are held in the GPU tier only by endpoints
// whose IDs span fewer than 64 — member arrays in the implicit form — with
// holders removed again in random order, a few CPU copies and speculative
// entries (arrays in the full form beside them), and every Match path: up
// to 64 candidates with IDs within 64 of each other (the standard masks),
// up to 64 candidates spread over more than 64 IDs (the per-ID bit table),
// and more than 64 candidates (the wide walk).
func TestMatchImplicitArraysAgainstReference(t *testing.T) {
	for _, tc := range []struct {
		name    string
		holders int // endpoints, registered in order (consecutive IDs)
		others  int // registered before them, holding nothing of the prompt
		cands   int // candidates among all registered endpoints
		spread  bool
	}{
		{"rel", 40, 0, 40, false},
		{"rel-offset", 50, 30, 60, false},
		{"bit-table", 60, 80, 64, true},
		{"wide", 60, 100, 150, true},
	} {
		for seed := uint64(1); seed <= 3; seed++ {
			t.Run(fmt.Sprintf("%s/seed=%d", tc.name, seed), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(seed, uint64(tc.holders)))
				clk := newFakeClock()
				ix := newTestIndex(t, Config{TierWeights: refWeights, SpeculativeWeight: refSpecWeight}, Options{Set: telemetry.Set{Clock: clk}})
				nBlocks := 8 + rng.IntN(8)
				prompt := seq(1, nBlocks*testBS)
				keys := Keys(nil, prompt, testBS, &KeyParams{Model: "m"})
				var names []string
				for o := 0; o < tc.others; o++ {
					name := fmt.Sprintf("10.6.%d.%d:8000", o/256, o%256)
					require.NoError(t, ix.Store(name, storeEv("m", 1, seq(1<<20+o*testBS, testBS))))
					names = append(names, name)
				}
				// Two blocks get CPU copies and speculative entries too.
				mixed := map[int]bool{rng.IntN(nBlocks): true, rng.IntN(nBlocks): true}
				model := map[string][]refState{}
				for h := 0; h < tc.holders; h++ {
					name := fmt.Sprintf("10.7.%d.%d:8000", h/256, h%256)
					held := make([]refState, nBlocks)
					prefix := rng.IntN(nBlocks + 1)
					for j := range held {
						if j < prefix || rng.IntN(3) == 0 {
							held[j] = refState{tiers: []string{"gpu"}}
							switch r := rng.IntN(6); {
							case !mixed[j]:
							case r == 0:
								held[j] = refState{tiers: []string{"gpu", "cpu"}}
							case r == 1:
								held[j] = refState{spec: true}
							}
						}
					}
					model[name] = held
					applyHoldings(t, ix, name, prompt, keys, held)
					names = append(names, name)
				}
				// Most of the prompt's blocks are implicit arrays.
				implicit := 0
				for _, k := range keys {
					if v, ok := ix.blocks.Load(k); ok && v.implicit() {
						implicit++
					}
				}
				require.Greater(t, implicit, nBlocks/2, "implicit arrays among %d blocks", nBlocks)
				clk.Advance(2 * time.Second)

				var cands []string
				switch {
				case tc.spread:
					perm := rng.Perm(len(names))
					for _, i := range perm[:min(tc.cands, len(names))] {
						cands = append(cands, names[i])
					}
					for len(cands) < tc.cands {
						cands = append(cands, fmt.Sprintf("ghost-%d", len(cands)))
					}
				default:
					cands = names[len(names)-tc.cands:]
				}
				var out MatchResult
				for round := 0; round < 2; round++ {
					ix.Match(keys, cands, &out)
					require.Equal(t, len(keys), out.Total)
					for c, name := range cands {
						want := refMatch(name, model[name])
						got := out.At(c)
						require.InDelta(t, want.Score, got.Score, 1e-9, "candidate %d %s", c, name)
						got.Score = want.Score
						require.Equal(t, want, got, "candidate %d %s", c, name)
					}
					rng.Shuffle(len(cands), func(i, j int) { cands[i], cands[j] = cands[j], cands[i] })
				}
				allocs := testing.AllocsPerRun(20, func() { ix.Match(keys, cands, &out) })
				require.Zero(t, allocs)
			})
		}
	}
}
