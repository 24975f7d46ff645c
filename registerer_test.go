package kvroute

import (
	"context"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"weak"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/checkpoint"
	"github.com/kvroute/kvroute/cluster"
	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/internal/redistest"
	"github.com/kvroute/kvroute/telemetry"
)

// familyNames gathers reg and returns the names of its metric families.
func familyNames(t *testing.T, reg *prometheus.Registry) []string {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	names := make([]string, 0, len(mfs))
	for _, mf := range mfs {
		names = append(names, mf.GetName())
	}
	return names
}

// Close unregisters everything New registered — the router's own metrics
// and those of its index, event pool, render client, affinity filter, load
// tracker, request table and checkpoint, some through the configured
// constant labels — so New, Close, New on one registry works, and a closed
// router leaves no metric family behind.
func TestCloseUnregistersMetrics(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	dir := t.TempDir()
	cfg := DefaultConfig()
	cfg.Model = testModel
	cfg.Render.URL = "http://127.0.0.1:1"
	cfg.Checkpoint = checkpoint.Config{Path: filepath.Join(dir, "index.ckpt"), Interval: -1}
	cfg.MetricLabels = MetricLabelsConfig{
		Render:     map[string]string{"plugin_name": "render"},
		Affinity:   map[string]string{"plugin_name": "affinity"},
		Prediction: map[string]string{"plugin_name": "prefix"},
	}
	reg := prometheus.NewRegistry()
	for round := 1; round <= 2; round++ {
		r, err := New(context.Background(), cfg, Options{Set: telemetry.Set{Registerer: reg}})
		require.NoError(t, err, "round %d: New on a registry a closed router used", round)
		eps := []Endpoint{{ID: "127.0.0.1:1"}}
		require.NoError(t, r.SetEndpoints(eps))
		d := pick(t, r, prompt(round, 128), eps)
		d.Done(DoneInfo{})
		r.render.Render(t.Context(), nil)
		names := familyNames(t, reg)
		for _, want := range []string{"kvroute_kv_index_memberships", "kvroute_index_restore_total", "kvroute_kv_events_dropped_total",
			"kvroute_router_decisions_total", "llm_d_epp_prefix_cache_affinity_filter_decisions_total",
			"llm_d_epp_token_producer_render_duration_seconds", "llm_d_epp_prefix_prompt_tokens"} {
			require.Contains(t, names, want, "round %d", round)
		}
		r.Close()
		require.Empty(t, familyNames(t, reg), "round %d: a closed router leaves no metric family", round)
	}
}

// The cluster replica's metrics, registered on the router's registry too,
// go with the router.
func TestCloseUnregistersClusterMetrics(t *testing.T) {
	defer leakcheck.Check(t)()
	rs := redistest.Start(t)
	defer func() { _ = rs.Stop() }()
	cfg := DefaultConfig()
	cfg.Model = testModel
	cfg.Events.Enabled = new(false)
	cfg.DisableRender = true
	cfg.Cluster = cluster.Config{Addrs: []string{rs.Addr}, Pool: "unregister", ReplicaID: "a"}
	reg := prometheus.NewRegistry()
	for round := 1; round <= 2; round++ {
		r, err := New(context.Background(), cfg, Options{Set: telemetry.Set{Registerer: reg}})
		require.NoError(t, err, "round %d", round)
		require.NotNil(t, r.Cluster())
		require.True(t, slices.ContainsFunc(familyNames(t, reg), func(n string) bool { return strings.HasPrefix(n, "kvroute_cluster_") }))
		r.Close()
		require.Empty(t, familyNames(t, reg), "round %d", round)
	}
}

// A closed router keeps nothing of its registry alive: the affinity
// filter's decision counter, which filters sharing a registry share, is
// released by Close, so a host that builds a Router per configuration
// reload does not grow a process-wide table of counters (each holding its
// registry) by one entry per Router.
func TestCloseReleasesTheRegistry(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	gone := routeAndClose(t)
	for range 3 { // a sync.Pool drops what it holds over two collections
		runtime.GC()
	}
	require.Nil(t, gone.Value(), "something the closed router left behind still holds its registry")
}

// routeAndClose builds a Router on a registry of its own, routes a request
// and closes it; it returns a weak pointer to the registry, which nothing
// else references once it returns.
func routeAndClose(t *testing.T) weak.Pointer[prometheus.Registry] {
	cfg := DefaultConfig()
	cfg.Model = testModel
	cfg.Events.Enabled = new(false)
	cfg.DisableRender = true
	reg := prometheus.NewRegistry()
	r, err := New(context.Background(), cfg, Options{Set: telemetry.Set{Registerer: reg}})
	require.NoError(t, err)
	eps := []Endpoint{{ID: "127.0.0.1:1"}}
	require.NoError(t, r.SetEndpoints(eps))
	pick(t, r, prompt(1, 128), eps).Done(DoneInfo{})
	r.Close()
	return weak.Make(reg)
}
