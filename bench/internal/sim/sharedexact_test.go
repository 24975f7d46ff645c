package sim

import (
	"testing"

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
