package kvindex

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/telemetry"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
)

// The stress test's fleet: each endpoint only ever holds (confirmed or
// speculatively) the first stressLimit(e, p) blocks of prompt p, so a
// Match reporting more for it, at any moment, reports a block the
// endpoint never held.
const (
	stressEndpoints = 6
	stressPrompts   = 32
	stressBlocks    = 16 // per prompt: 512 blocks over the 256 shards
)

// stressLimit returns how many leading blocks of prompt p endpoint e
// stores (0: none, ever).
func stressLimit(e, p int) int { return (e*7 + p*5) % (stressBlocks + 1) }

// stressPrompt returns prompt p's tokens; prompts share no block.
func stressPrompt(p int) []uint32 { return seq(1+p*100_000, stressBlocks*testBS) }

// stressModel is one endpoint's expected state: per prompt, how many
// stores of its prefix each tier holds.
type stressModel struct{ gpu, cpu [stressPrompts]int }

// stressWriter applies ops random operations to endpoint e (the only
// writer of e) and returns the state it left: stores and removals of a
// prompt's prefix in the GPU and CPU tiers (reference-counted up to three
// copies, so memberships go through every form), speculation on it, and
// an occasional Clear. Every hundred operations it waits for the readers
// to complete some Matches, so that they run in every stretch of its work
// however busy the machine is.
func stressWriter(t *testing.T, ix *Index, clk *telemetry.Manual, e, ops int, matches *atomic.Int64) stressModel {
	var m stressModel
	name := fmt.Sprintf("10.0.1.%d:8000", e)
	rng := rand.New(rand.NewPCG(uint64(e), 11))
	for i := 0; i < ops; i++ {
		if i%100 == 0 && i > 0 {
			for at := matches.Load(); matches.Load() < at+4; {
				runtime.Gosched()
			}
		}
		p := rng.IntN(stressPrompts)
		n := stressLimit(e, p)
		if n == 0 {
			continue
		}
		tokens, base := stressPrompt(p)[:n*testBS], uint64(p+1)<<16
		hashes := make([]uint64, n)
		for j := range hashes {
			hashes[j] = base + uint64(j)
		}
		switch op := rng.IntN(20); {
		case op < 6:
			cnt, tier := &m.gpu[p], "gpu"
			if op%2 == 1 {
				cnt, tier = &m.cpu[p], "cpu"
			}
			if *cnt == 3 {
				continue
			}
			ev := storeEv("m", base, tokens)
			ev.Tier = tier
			if err := ix.Store(name, ev); err != nil {
				t.Errorf("endpoint %d: %v", e, err)
				return m
			}
			*cnt++
		case op < 12:
			cnt, tier := &m.gpu[p], "gpu"
			if op%2 == 1 {
				cnt, tier = &m.cpu[p], "cpu"
			}
			if *cnt == 0 {
				continue
			}
			ix.Remove(name, hashes, tier, 0)
			*cnt--
		case op < 19:
			ttl := time.Duration(1+rng.IntN(50)) * time.Millisecond
			ix.Speculate(name, Keys(nil, tokens, testBS, &KeyParams{Model: "m"}), ttl)
			clk.Advance(time.Millisecond) // some expire: Match skips them, Sweep removes them
		default:
			if rng.IntN(10) == 0 {
				ix.Clear(name)
				m = stressModel{}
			} else {
				ix.Sweep()
			}
		}
	}
	return m
}

// Writers for several endpoints store, remove, speculate and clear blocks
// of shared prompts (tombstones, slot moves, table and arena rebuilds, and
// every member-array form in the block map) while readers Match without
// pause, over a candidate list on Match's mask path and one on its wide
// path (more than 64 candidates). No Match may report an endpoint holding
// more of a prompt than it ever stored of it, and once the writers stop,
// Match, the counters and the block map agree with the writers' model
// exactly. Run it under -race, and with -count to vary the interleavings.
func TestMatchUnderConcurrentWritersNeverReportsUnstoredBlocks(t *testing.T) {
	defer leakcheck.Check(t)()
	clk := newFakeClock()
	ix, err := New(Config{BlockSize: testBS, SweepInterval: 100 * time.Millisecond},
		Options{Set: telemetry.Set{Registerer: prometheus.NewRegistry(), Clock: clk}})
	require.NoError(t, err)
	defer ix.Close()

	// Candidates: the endpoints and one never seen (limit 0), then the same
	// padded past 64 with unknown names.
	names := make([]string, stressEndpoints+1)
	for e := range names {
		names[e] = fmt.Sprintf("10.0.1.%d:8000", e)
	}
	wide := append([]string(nil), names...)
	for len(wide) <= 70 {
		wide = append(wide, fmt.Sprintf("10.0.2.%d:8000", len(wide)))
	}
	limit := func(c, p int) int {
		if c >= stressEndpoints {
			return 0
		}
		return stressLimit(c, p)
	}
	keys := make([][]Key, stressPrompts)
	for p := range keys {
		keys[p] = Keys(nil, stressPrompt(p), testBS, &KeyParams{Model: "m"})
	}

	var stop atomic.Bool
	var matches, bad atomic.Int64
	var firstBad atomic.Value
	var readers sync.WaitGroup
	for r, cands := range [][]string{names, wide, names} {
		readers.Add(1)
		go func() {
			defer readers.Done()
			var out MatchResult
			for i := r; !stop.Load(); i++ {
				p := i % stressPrompts
				ix.Match(keys[p], cands, &out)
				matches.Add(1)
				for c, em := range out.Endpoints() {
					if em.Blocks > limit(c, p) || em.GPU > em.Blocks || em.CPU > em.Blocks || em.Speculative > em.Blocks {
						if bad.Add(1) == 1 {
							firstBad.Store(fmt.Sprintf("prompt %d, candidate %d (limit %d): %+v", p, c, limit(c, p), em))
						}
					}
				}
			}
		}()
	}
	models := make([]stressModel, stressEndpoints)
	var writers sync.WaitGroup
	for e := range models {
		writers.Add(1)
		go func() {
			defer writers.Done()
			models[e] = stressWriter(t, ix, clk, e, 1500, &matches)
		}()
	}
	writers.Wait()
	stop.Store(true)
	readers.Wait()
	require.Zero(t, bad.Load(), "Match reported blocks an endpoint never stored, first: %v", firstBad.Load())

	// Quiescent: speculation expired, the index is the model.
	clk.Advance(2 * time.Minute)
	ix.Sweep()
	var members int
	held := map[Key]bool{}
	for p := range keys {
		r := match(ix, "m", stressPrompt(p), wide...)
		for c, em := range r.Endpoints() {
			var want EndpointMatch
			want.Endpoint = wide[c]
			if c < stressEndpoints {
				md, n := models[c], stressLimit(c, p)
				if md.gpu[p] > 0 {
					want.GPU = n
				}
				if md.cpu[p] > 0 {
					want.CPU = n
				}
				want.Blocks = max(want.GPU, want.CPU)
				members += want.Blocks
				for _, k := range keys[p][:want.Blocks] {
					held[k] = true
				}
			}
			em.Score = 0
			require.Equal(t, want, em, "prompt %d", p)
		}
	}
	for e := 0; e < stressEndpoints; e++ {
		var n int
		for p := range keys {
			if models[e].gpu[p]+models[e].cpu[p] > 0 {
				n += stressLimit(e, p)
			}
		}
		require.Equal(t, n, ix.EndpointBlocks(names[e]), "endpoint %d", e)
	}
	blocks, mems, spec := recount(ix)
	st := ix.Stats()
	require.Equal(t, len(held), blocks)
	require.Equal(t, members, mems)
	require.Zero(t, spec)
	require.Equal(t, blocks, st.Blocks)
	require.Equal(t, mems, st.Memberships)
	require.Zero(t, st.Speculative)
	for k := range held {
		_, ok := ix.blocks.Load(k)
		require.True(t, ok)
	}
}
