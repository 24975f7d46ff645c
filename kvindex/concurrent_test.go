package kvindex

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/telemetry"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
)

// recount walks the block map and returns its blocks, memberships and
// speculative memberships, to check the index's counters.
func recount(ix *Index) (blocks, members, spec int) {
	ix.blocks.Range(func(_ Key, v blockVal) bool {
		blocks++
		var single memberBuf
		for _, m := range v.members(&single) {
			members++
			if isSpec(m) {
				spec++
			}
		}
		return true
	})
	return blocks, members, spec
}

func TestConcurrentReadersAndWriters(t *testing.T) {
	defer leakcheck.Check(t)()
	clk := newFakeClock()
	ix, err := New(Config{BlockSize: testBS, SweepInterval: time.Millisecond, MaxBlocksPerEndpoint: 40}, Options{Set: telemetry.Set{Registerer: prometheus.NewRegistry(), Clock: clk}})
	require.NoError(t, err)
	defer ix.Close()

	const endpoints, rounds = 6, 300
	names := make([]string, endpoints)
	for i := range names {
		names[i] = fmt.Sprintf("10.0.0.%d:8000", i)
	}
	prompts := [][]uint32{seq(1, 12*testBS), seq(1, 6*testBS), seq(5000, 12*testBS)}
	stop := make(chan struct{})
	var readers, writers sync.WaitGroup
	for r := 0; r < 3; r++ {
		readers.Add(1)
		go func(r int) {
			defer readers.Done()
			var out MatchResult
			keys := Keys(nil, prompts[r], testBS, &KeyParams{Model: "m"})
			for {
				select {
				case <-stop:
					return
				default:
				}
				ix.Match(keys, names, &out)
				for _, e := range out.Endpoints() {
					if e.Blocks < 0 || e.Blocks > len(keys) || e.GPU > e.Blocks || e.CPU > e.Blocks || e.Speculative > e.Blocks {
						t.Errorf("inconsistent match %+v", e)
						return
					}
				}
				_ = ix.Stats()
			}
		}(r)
	}
	// Two writers per endpoint race on the same endpoint state, as a
	// misbehaving caller could; per-endpoint locking keeps it consistent.
	for w := 0; w < 2*endpoints; w++ {
		writers.Add(1)
		go func(w int) {
			defer writers.Done()
			ep := names[w%endpoints]
			for i := 0; i < rounds; i++ {
				p := prompts[(w+i)%len(prompts)]
				base := uint64(w%3) << 20
				switch i % 7 {
				case 0, 1, 2:
					_ = ix.Store(ep, storeEv("m", base, p))
				case 3:
					_ = ix.Store(ep, &StoreEvent{EngineHashes: []uint64{base, base + 1}, BlockSize: testBS, Tier: "cpu", Group: 0})
				case 4:
					ix.Remove(ep, []uint64{base + 1, base + 2}, "gpu", 0)
				case 5:
					ix.Speculate(ep, Keys(nil, p, testBS, &KeyParams{Model: "m"}), time.Duration(1+i%3)*time.Millisecond)
					clk.Advance(time.Millisecond)
				case 6:
					if i%21 == 6 {
						ix.Clear(ep)
					} else {
						ix.Sweep()
					}
				}
			}
		}(w)
	}
	writers.Wait()
	close(stop)
	readers.Wait()

	clk.Advance(time.Hour)
	ix.Sweep()
	blocks, members, spec := recount(ix)
	st := ix.Stats()
	require.Equal(t, blocks, st.Blocks)
	require.Equal(t, members, st.Memberships)
	require.Equal(t, spec, st.Speculative)
	require.Zero(t, spec)
	// No membership outlives its endpoint's registration (IDs get reused).
	live := map[uint32]bool{}
	ix.eps.Range(func(_ string, ep *endpoint) bool { live[ep.id] = true; return true })
	ix.blocks.Range(func(_ Key, v blockVal) bool {
		var single memberBuf
		for _, m := range v.members(&single) {
			require.True(t, live[memberID(m)], "membership of unregistered endpoint %d", memberID(m))
		}
		return true
	})

	// Every endpoint still works from a clean state.
	for _, ep := range names {
		ix.Clear(ep)
		require.NoError(t, ix.Store(ep, storeEv("m", 1, prompts[1])))
	}
	r := match(ix, "m", prompts[0], names...)
	for _, e := range r.Endpoints() {
		require.Equal(t, 6, e.Blocks)
	}
}
