package sim

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestMissesAddUp checks the decomposition's identities on every policy of
// a small sweep: bound − replacement − placement − routing − in flight is
// the hit rate, the bound's own misses are compulsory plus Belady's
// capacity misses, routing is never negative and, for kvroute, its split
// by the affinity filter's outcome sums to it.
func TestMissesAddUp(t *testing.T) {
	cfg := Quick(0.75)
	policies := []Policy{KVRoute, Dynamo, RoundRobin}
	results, err := Sweep(context.Background(), cfg, []Workload{cfg.Workload}, []float64{0.75}, policies, 2)
	require.NoError(t, err)
	require.Len(t, results, len(policies))
	for _, r := range results {
		m := r.Misses
		require.NotNil(t, m, r.Policy)
		require.Zero(t, m.EventsDropped, "%s: the fleet's caches were observed exactly", r.Policy)
		require.Positive(t, r.OneEngineHitRate, "%s: the sweep filled the one-engine reference", r.Policy)
		require.InDelta(t, r.HitRate, r.BoundHitRate-m.Residency-m.Replacement-m.Placement-m.Routing-m.InFlight, 1e-9, r.Policy)
		require.InDelta(t, 1-r.BoundHitRate, m.Compulsory+m.BeladyCapacity, 1e-9, r.Policy)
		require.InDelta(t, r.BoundHitRate-r.LRUBoundHitRate, m.Residency, 1e-12, r.Policy)
		require.GreaterOrEqual(t, m.Residency, 0.0, r.Policy)
		require.InDelta(t, r.LRUBoundHitRate-r.OneEngineHitRate, m.Replacement, 1e-12, r.Policy)
		require.GreaterOrEqual(t, m.Routing, 0.0, r.Policy)
		require.GreaterOrEqual(t, m.Anywhere, m.Chosen, r.Policy)
		require.GreaterOrEqual(t, m.Compulsory, 0.0, r.Policy)
		require.True(t, m.Duplication >= 0 && m.Duplication < 1, "%s: duplication %v", r.Policy, m.Duplication)
		require.LessOrEqual(t, r.OneEngineHitRate, r.BoundHitRate+1e-9, "%s: the bound holds for one engine too", r.Policy)
		require.LessOrEqual(t, r.OneEngineHitRate, r.LRUBoundHitRate+1e-9, "%s: the LRU-residency bound too", r.Policy)
	}
	kv, rr := results[0], results[2]
	require.InDelta(t, kv.Misses.Routing, kv.Misses.RoutingGate+kv.Misses.RoutingBelowThreshold+kv.Misses.RoutingUnknown+kv.Misses.RoutingWarmer, 1e-9)
	require.Zero(t, rr.Misses.RoutingGate+rr.Misses.RoutingBelowThreshold+rr.Misses.RoutingUnknown+rr.Misses.RoutingWarmer,
		"only kvroute's decisions carry a filter outcome")
	// Round-robin ignores where the prefixes are: its routing share dwarfs
	// kvroute's, and it spreads copies of every group over the fleet.
	require.Greater(t, rr.Misses.Routing, 10*kv.Misses.Routing+0.05)
	require.Greater(t, rr.Misses.Duplication, kv.Misses.Duplication)
	t.Logf("kvroute %+v", *kv.Misses)
	t.Logf("round-robin %+v", *rr.Misses)
}

// TestMissesOneEngineFleet checks the observation itself: on a fleet of one
// engine every request goes where everything is, so nothing is lost to
// routing and no block has a second copy.
func TestMissesOneEngineFleet(t *testing.T) {
	cfg := Quick(0.5)
	cfg.Fleet.Engines = 1
	cfg.Fleet.NumGPUBlocks = 2048
	cfg.Workload.Groups = 16
	cfg.Workload.Requests = 150
	res, err := Run(cfg, KVRoute)
	require.NoError(t, err)
	m := res.Misses
	require.NotNil(t, m)
	require.Zero(t, m.Routing)
	require.Zero(t, m.Duplication)
	require.Positive(t, m.Anywhere, "the engine's cache was observed")
	require.InDelta(t, res.HitRate, m.Chosen-m.InFlight, 1e-9)
}

// TestOneEngine checks the merged fleet: the same capacity (so the same
// arrivals), the whole fleet's cache, budget and sequences in one engine,
// for the heterogeneous fleet too (slow engines counted at their speed).
func TestOneEngine(t *testing.T) {
	for _, kind := range []WorkloadKind{SharedPrefix, Heterogeneous} {
		cfg := DefaultConfig(kind, 1)
		one := OneEngine(cfg)
		require.NoError(t, one.Validate(), kind)
		require.Equal(t, 1, one.Fleet.Engines)
		require.Equal(t, cfg.CacheBlocks(), one.CacheBlocks(), kind)
		require.Equal(t, cfg.Fleet.Engines*cfg.Fleet.MaxNumBatchedTokens, one.Fleet.MaxNumBatchedTokens)
		require.Equal(t, cfg.Fleet.Engines*cfg.Fleet.MaxNumSeqs, one.Fleet.MaxNumSeqs)
		require.InDelta(t, cfg.Capacity(), one.Capacity(), 1e-9, kind)
		require.Equal(t, 1, one.GatewayReplicas)
	}
}

// TestReportHasMissesSection checks that the report explains and tabulates
// the decomposition for kvroute.
func TestReportHasMissesSection(t *testing.T) {
	cfg := Quick(0.5)
	cfg.Workload.Requests = 120
	results, err := Sweep(context.Background(), cfg, []Workload{cfg.Workload}, []float64{0.5}, []Policy{KVRoute}, 1)
	require.NoError(t, err)
	var b strings.Builder
	require.NoError(t, WriteMarkdown(&b, Meta{Base: cfg, Workloads: []Workload{cfg.Workload}, Loads: []float64{0.5}}, results))
	out := b.String()
	require.Contains(t, out, "## Where kvroute's misses go")
	require.Contains(t, out, "| shared-prefix | 0.50 | "+pct(results[0].HitRate)+" | ")
	require.Contains(t, out, "÷ one engine")

	b.Reset()
	require.NoError(t, WriteMissesTable(&b, "Title", "A note.", results))
	require.Contains(t, b.String(), "## Title\n\nA note.\n\n| workload | load | kvroute hit rate |")
	b.Reset()
	require.NoError(t, WriteMissesTable(&b, "Title", "A note.", nil))
	require.Empty(t, b.String(), "no kvroute result, no section")
}
