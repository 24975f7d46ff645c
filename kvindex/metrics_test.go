package kvindex

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/telemetry"
)

func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	clk := newFakeClock()
	ix := newTestIndex(t, Config{MaxBlocksPerEndpoint: 3}, Options{Set: telemetry.Set{Registerer: reg, Clock: clk}})
	prompt := seq(1, 4*testBS)
	require.NoError(t, ix.Store("a", storeEv("m", 1, prompt[:2*testBS])))
	require.NoError(t, ix.Store("b", storeEv("m", 1, prompt))) // 1 capacity eviction
	ix.Speculate("c", Keys(nil, seq(900, testBS), testBS, &KeyParams{Model: "m"}), time.Second)
	clk.Advance(time.Second)
	ix.Sweep()                                   // 1 expiry
	match(ix, "m", prompt, "a", "b")             // best: a with 2
	match(ix, "m", seq(700, 2*testBS), "a", "b") // miss
	ix.Clear("a")                                // 2 endpoint_removed
	// Bytes: b's 3 memberships and entries, 2 private and 1 still in the
	// pool (it was a's too).

	expected := `
# HELP kvroute_kv_index_blocks Distinct blocks in the KV-block index.
# TYPE kvroute_kv_index_blocks gauge
kvroute_kv_index_blocks 3
# HELP kvroute_kv_index_bytes Memory accounted by the KV-block index, in bytes (bounded by its maxBytes).
# TYPE kvroute_kv_index_bytes gauge
kvroute_kv_index_bytes 142
# HELP kvroute_kv_index_evictions_total Entries removed by the KV-block index itself, by reason.
# TYPE kvroute_kv_index_evictions_total counter
kvroute_kv_index_evictions_total{reason="capacity"} 1
kvroute_kv_index_evictions_total{reason="endpoint_removed"} 2
kvroute_kv_index_evictions_total{reason="memory"} 0
kvroute_kv_index_evictions_total{reason="speculative_expired"} 1
# HELP kvroute_kv_index_memberships (block, endpoint) memberships in the KV-block index, speculative included.
# TYPE kvroute_kv_index_memberships gauge
kvroute_kv_index_memberships 3
# HELP llm_d_epp_kv_cache_index_lookup_hits_total Contiguous prefix blocks from block 0 held by the best candidate, summed over lookups.
# TYPE llm_d_epp_kv_cache_index_lookup_hits_total counter
llm_d_epp_kv_cache_index_lookup_hits_total 2
# HELP llm_d_epp_kv_cache_index_lookup_requests_total KV-block index lookups (Match calls).
# TYPE llm_d_epp_kv_cache_index_lookup_requests_total counter
llm_d_epp_kv_cache_index_lookup_requests_total 2
`
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(expected),
		"kvroute_kv_index_blocks", "kvroute_kv_index_bytes", "kvroute_kv_index_evictions_total", "kvroute_kv_index_memberships",
		"llm_d_epp_kv_cache_index_lookup_hits_total", "llm_d_epp_kv_cache_index_lookup_requests_total"))
	require.Equal(t, 1, testutil.CollectAndCount(reg, "llm_d_epp_kv_cache_index_lookup_latency_seconds"))

	// A second index on the same registry fails cleanly and registers nothing.
	_, err := New(Config{SweepInterval: -1}, Options{Set: telemetry.Set{Registerer: reg}})
	require.Error(t, err)
	n, err := testutil.GatherAndCount(reg)
	require.NoError(t, err)
	require.Equal(t, 10, n)
}

func TestNoMetricsWithoutRegisterer(t *testing.T) {
	ix := newTestIndex(t, Config{})
	require.Nil(t, ix.met)
	match(ix, "m", seq(1, testBS), "a")
}

// A lookup's hits are the best candidate's blocks as Match reports them,
// rounded down to whole engine blocks and limited by the candidate's
// non-prefix cache groups: the counter took the longest run of the walk
// before those limits, so for engines of another block size and for
// hybrid-attention models it counted blocks no candidate could reuse.
func TestLookupHitsAreTheReportedBlocks(t *testing.T) {
	reg := prometheus.NewRegistry()
	ix := newTestIndex(t, Config{}, Options{Set: telemetry.Set{Registerer: reg}})
	hits := func() float64 {
		t.Helper()
		mfs, err := reg.Gather()
		require.NoError(t, err)
		for _, mf := range mfs {
			if mf.GetName() == "llm_d_epp_kv_cache_index_lookup_hits_total" {
				return mf.GetMetric()[0].GetCounter().GetValue()
			}
		}
		t.Fatal("no hits counter")
		return 0
	}
	prompt := hybridSnapIndex(t, ix) // hy:1 reusable up to 9 of its 12 blocks
	r := match(ix, "m", prompt, "hy:1")
	require.Equal(t, []int{9}, blocksOf(r))
	require.Equal(t, 9.0, hits())

	// An engine of twice the router's block size reuses 2 of 3 blocks.
	require.NoError(t, ix.Store("e", storeEv("m", 900, seq(1, 3*testBS))))
	ix.SetEngineBlockSize("e", 2*testBS)
	r = match(ix, "m", seq(1, 3*testBS), "e")
	require.Equal(t, []int{2}, blocksOf(r))
	require.Equal(t, 9.0+2, hits())

	// The best candidate is the one with the most reported blocks.
	r = match(ix, "m", prompt, "hy:1", "e", "plain:1")
	require.Equal(t, []int{9, 2, 12}, blocksOf(r))
	require.Equal(t, 9.0+2+12, hits())
	r = match(ix, "m", prompt, "hy:1", "e")
	require.Equal(t, []int{9, 2}, blocksOf(r))
	require.Equal(t, 9.0+2+12+9, hits())

	// So with more than 64 candidates.
	wide := []string{"hy:1", "e"}
	for i := range 70 {
		wide = append(wide, fmt.Sprint("unknown:", i))
	}
	r = match(ix, "m", prompt, wide...)
	require.Equal(t, []int{9, 2}, blocksOf(r)[:2])
	require.Equal(t, 9.0+2+12+9+9, hits())
}
