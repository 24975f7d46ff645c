package kvevents

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/kvevents/wire"
	"github.com/kvroute/kvroute/kvindex"
	"github.com/kvroute/kvroute/simengine"
	"github.com/kvroute/kvroute/telemetry"
)

// resizeRig runs simulated engines of several block sizes into one index
// whose block size is routerBS, through the wire format and an Applier.
type resizeRig struct {
	t       *testing.T
	ix      *kvindex.Index
	a       *Applier
	reg     *prometheus.Registry
	engines []*simengine.Engine
	ids     []string
	pending [][]simengine.EventBatch
	dec     *wire.Decoder
	b       wire.Batch
	total   ApplyResult
}

const resizeModel = "m"

func newResizeRig(t *testing.T, routerBS int, sizes []int, capacityTokens int) *resizeRig {
	t.Helper()
	cfgs := make([]simengine.Config, len(sizes))
	for i, bs := range sizes {
		cfgs[i] = simengine.Config{BlockSize: bs, NumGPUBlocks: capacityTokens / bs}
	}
	return newEngineRig(t, routerBS, cfgs)
}

// newEngineRig is newResizeRig with the engines' configurations given.
func newEngineRig(t *testing.T, routerBS int, cfgs []simengine.Config) *resizeRig {
	t.Helper()
	ix, err := kvindex.New(kvindex.Config{BlockSize: routerBS, SweepInterval: -1}, kvindex.Options{})
	require.NoError(t, err)
	t.Cleanup(ix.Close)
	reg := prometheus.NewRegistry()
	a, err := NewApplier(ApplierConfig{Model: resizeModel}, ix, Options{Set: telemetry.Set{Registerer: reg}})
	require.NoError(t, err)
	r := &resizeRig{t: t, ix: ix, a: a, reg: reg, dec: wire.NewDecoder(wire.Limits{}), pending: make([][]simengine.EventBatch, len(cfgs))}
	for i, c := range cfgs {
		i := i
		c.Model = resizeModel
		c.Sink = simengine.EventSinkFunc(func(b simengine.EventBatch) { r.pending[i] = append(r.pending[i], b) })
		e, err := simengine.New(c, simengine.Options{})
		require.NoError(t, err)
		t.Cleanup(e.Close)
		r.engines = append(r.engines, e)
		r.ids = append(r.ids, fmt.Sprintf("10.0.0.%d:8000", i+1))
	}
	return r
}

// deliver applies every engine's pending batches, encoded and decoded as
// vLLM's publisher and kvroute's subscriber would.
func (r *resizeRig) deliver() {
	for i := range r.engines {
		for _, eb := range r.pending[i] {
			var wb wire.Batch
			for j := range eb.Events {
				simToWire(&wb, &eb.Events[j])
			}
			require.NoError(r.t, r.dec.Decode(wire.AppendBatch(nil, &wb, wire.FormatVLLM), &r.b))
			res := r.a.Apply(r.ids[i], resizeModel, &r.b)
			r.total.Stored += res.Stored
			r.total.Removed += res.Removed
			r.total.Skipped += res.Skipped
			r.total.Dropped += res.Dropped
		}
		r.pending[i] = r.pending[i][:0]
	}
}

// simToWire appends the wire form of one simulated engine event.
func simToWire(b *wire.Batch, e *simengine.Event) {
	b.Events = append(b.Events, wire.Event{})
	w := &b.Events[len(b.Events)-1]
	switch e.Type {
	case simengine.BlockStored:
		w.Type = wire.EventBlockStored
	case simengine.BlockRemoved:
		w.Type = wire.EventBlockRemoved
	default:
		w.Type = wire.EventAllBlocksCleared
		return
	}
	w.BlockHashes, w.ParentHash, w.HasParent = e.BlockHashes, e.ParentHash, e.HasParent
	w.TokenIDs, w.BlockSize, w.Medium = e.TokenIDs, e.BlockSize, e.Medium
	w.Group, w.HasGroup, w.Kind = e.GroupIdx, true, e.Kind
	if e.SlidingWindow > 0 {
		w.SlidingWindow, w.HasSlidingWindow = int64(e.SlidingWindow), true
	}
	for _, keys := range e.ExtraKeys {
		var ks []wire.ExtraKey
		for _, k := range keys {
			ks = append(ks, k.Wire())
		}
		w.ExtraKeys = append(w.ExtraKeys, ks)
	}
}

// checkExact asserts that, for every probe and engine whose block size is
// a multiple or a divisor of routerBS, Match gives exactly the engine's
// cached prefix in whole router blocks; for the others it never reports
// more, and less by at most the router blocks of one engine block plus
// one (kvindex.SetEngineBlockSize). It returns the matches checked that
// were not zero, and how many of the other engines' were below the truth.
func (r *resizeRig) checkExact(routerBS int, probes [][]uint32) (nonzero, below int) {
	r.t.Helper()
	var out kvindex.MatchResult
	for pi, p := range probes {
		keys := kvindex.Keys(nil, p, routerBS, &kvindex.KeyParams{Model: resizeModel})
		r.ix.Match(keys, r.ids, &out)
		for i, e := range r.engines {
			want, got, E := e.CachedTokens(p)/routerBS, out.Blocks(i), e.BlockSize()
			msg := fmt.Sprintf("probe %d (%d tokens), engine block size %d", pi, len(p), E)
			if E%routerBS == 0 || routerBS%E == 0 {
				require.Equal(r.t, want, got, msg)
			} else {
				require.LessOrEqual(r.t, got, want, msg)
				require.LessOrEqual(r.t, want-got, (E+routerBS-1)/routerBS+1, msg)
				if got < want {
					below++
				}
			}
			if want > 0 {
				nonzero++
			}
		}
	}
	return nonzero, below
}

// TestResizedEnginesMatchExactly runs engines of block sizes 16, 64, 128
// (ratios of the router's 64) and 48, 96 (neither divides the other) with
// evictions, and asserts after every round that Match reports for each
// engine exactly the prefix it holds, in whole router blocks (bounded from
// below for 48 and 96, see checkExact).
func TestResizedEnginesMatchExactly(t *testing.T) {
	const routerBS = 64
	sizes := []int{16, 64, 128, 48, 96}
	r := newResizeRig(t, routerBS, sizes, 40*routerBS*3) // ~120 router blocks each: evictions within a few rounds
	rng := rand.New(rand.NewPCG(3, 5))
	prefixes := make([][]uint32, 6)
	for i := range prefixes {
		prefixes[i] = randTokens(rng, 100+rng.IntN(400))
	}
	var probes [][]uint32
	nonzero, below := 0, 0
	for round := 0; round < 30; round++ {
		for k := 0; k < 4; k++ {
			p := append(append([]uint32(nil), prefixes[rng.IntN(len(prefixes))]...), randTokens(rng, 50+rng.IntN(500))...)
			probes = append(probes, p)
			for _, e := range r.engines {
				_, err := e.Submit(simengine.Request{Prompt: p, MaxTokens: 1 + rng.IntN(40)})
				require.NoError(t, err)
			}
		}
		for _, e := range r.engines {
			e.RunUntilIdle()
		}
		r.deliver()
		nz, b := r.checkExact(routerBS, probes)
		nonzero, below = nonzero+nz, below+b
	}
	t.Logf("non-zero matches %d; matches of the non-multiple engines below their cached prefix: %d", nonzero, below)
	require.Zero(t, r.total.Dropped, "no store lost its parent")
	require.Zero(t, r.total.Skipped)
	require.NotZero(t, r.total.Removed, "the engines evicted")
	require.Greater(t, nonzero, 100, "the probes matched")
	for _, e := range r.engines {
		require.NotZero(t, e.Stats().NumBlocks)
	}
}

func randTokens(rng *rand.Rand, n int) []uint32 {
	out := make([]uint32, n)
	for i := range out {
		out[i] = uint32(rng.IntN(150000))
	}
	return out
}
