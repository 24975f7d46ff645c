package sim

import (
	"bytes"
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// exactConfig is shared-prefix at 1.5× with n replicas round-robin, shared
// state with the given exact parts.
func exactConfig(n int, exact SharedExact) Config {
	cfg := DefaultConfig(SharedPrefix, 1.5)
	cfg.Workload.Requests = 300
	cfg.GatewayReplicas, cfg.RoundRobinReplicas = n, true
	if n > 1 {
		s := SharedState{Exact: exact}.withDefaults()
		cfg.SharedState = &s
	}
	return cfg
}

// TestSharedExactAllDecidesAsOneRouter: with SharedExact.All the replicas
// of a real run (no test diagnostics sharing for them) make one router's
// decisions pick by pick, the decomposition's reference.
func TestSharedExactAllDecidesAsOneRouter(t *testing.T) {
	one := &diagnostics{}
	want, err := runWith(exactConfig(1, SharedExact{}), KVRoute, one)
	require.NoError(t, err)
	four := &diagnostics{}
	got, err := runWith(exactConfig(4, SharedExact{All: true}), KVRoute, four)
	require.NoError(t, err)
	require.Len(t, four.picks, len(one.picks))
	for i := range one.picks {
		b := four.picks[i]
		b.replica = 0
		require.Equal(t, one.picks[i], b, "pick %d", i)
	}
	require.Equal(t, want.TTFTP90, got.TTFTP90)
	require.Equal(t, want.HitRate, got.HitRate)
}

// TestSharedExactLoad: with SharedExact.Load every pick sees the fleet's
// exact in-flight tokens on every engine; the modelled pool, whose load
// changes take a pub/sub hop, does not at some picks (so the check can
// fail), and neither mode is one router's decisions.
func TestSharedExactLoad(t *testing.T) {
	mismatches := func(exact SharedExact) int {
		d := &diagnostics{}
		_, err := runWith(exactConfig(4, exact), KVRoute, d)
		require.NoError(t, err)
		require.Len(t, d.picks, 300)
		n := 0
		for _, p := range d.picks {
			if !equalInt64s(p.tokens, p.exact) {
				n++
			}
		}
		return n
	}
	require.Zero(t, mismatches(SharedExact{Load: true}), "picks that saw other than the fleet's exact load")
	require.Positive(t, mismatches(SharedExact{}), "the modelled pool's load lags at some picks")
	require.Equal(t, "load exact", SharedExact{Load: true}.String())
	require.Equal(t, "decisions and load exact", SharedExact{All: true, Load: true}.String())
	require.Equal(t, "modelled", SharedExact{}.String())
}

func equalInt64s(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestDecomposeReplicas: the decomposition reuses one router's runs of the
// row it decomposes, its exact-all part is one router on every seed, its
// control perturbs one router, and its table has a line per part.
func TestDecomposeReplicas(t *testing.T) {
	base := Quick(1.5)
	base.Workload.Requests = 120
	seeds := []uint64{1, 2, 3}
	rows, err := SeedSweep(context.Background(), base, []float64{1.5}, []int{1, 2}, SharedState{}, seeds, nil, 2)
	require.NoError(t, err)
	parts, err := DecomposeReplicas(context.Background(), base, rows[1], SharedState{}, AllReplicaParts, 2)
	require.NoError(t, err)
	require.Len(t, parts, 1+len(AllReplicaParts))
	require.Equal(t, rows[1], parts[0].SeedRow, "first the modelled pool's row")
	for i, p := range AllReplicaParts {
		got := parts[i+1]
		require.Equal(t, p, got.Part)
		require.Equal(t, rows[1].Single, got.Single, "%s: compared with the same one-router runs", p)
	}
	all := parts[1+slices.Index(AllReplicaParts, PartExactAll)]
	require.Equal(t, len(seeds), all.Identical(), "exact sharing is one router on every seed")
	cfg := base
	cfg.Load, cfg.Seed, cfg.EventDelay = 1.5, 2, base.EventDelay+ControlShift
	ctl, err := Run(replicaConfig(cfg, 1.5, 1, nil), KVRoute)
	require.NoError(t, err)
	require.Equal(t, ctl.TTFTP90, parts[len(parts)-1].Shared[1], "the control is one router with its events later")

	var md bytes.Buffer
	WriteReplicaParts(&md, SharedState{}, parts)
	require.Contains(t, md.String(), "part by part")
	require.Equal(t, len(parts)+2, bytes.Count(md.Bytes(), []byte("\n|")), "header, rule and one line per part")
	_, err = ParseReplicaPart("nope")
	require.ErrorIs(t, err, ErrInvalidConfig)
}

// TestSeedRowWithinOK: the per-seed target needs 95 % of the seeds within
// 5 %; identical seeds count as identical.
func TestSeedRowWithinOK(t *testing.T) {
	single := make([]time.Duration, 20)
	shared := make([]time.Duration, 20)
	for i := range single {
		single[i], shared[i] = 100, 100
	}
	row := SeedRow{Single: single, Shared: shared}
	require.True(t, row.WithinOK())
	require.Equal(t, 20, row.Identical())
	shared[0] = 106 // 19 of 20 within: 95 %
	require.True(t, row.WithinOK())
	shared[1] = 110 // 18 of 20
	require.False(t, row.WithinOK())
	require.Equal(t, 18, row.Identical())
	require.False(t, SeedRow{}.WithinOK())
}
