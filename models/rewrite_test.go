package models

import (
	"math/rand/v2"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
)

func canary() []Rule {
	return []Rule{
		{Model: "llama", Targets: []Target{{Model: "llama-v1", Weight: 90}, {Model: "llama-v2", Weight: 10}}},
		{Model: "chat", Targets: []Target{{Model: "llama-v1"}}},
		{Model: "even", Targets: []Target{{Model: "a"}, {Model: "b"}}},
	}
}

func TestTableSplitsByWeightDeterministically(t *testing.T) {
	run := func() map[string]int {
		rnd := rand.New(rand.NewPCG(7, 7))
		tb, err := NewTable(canary(), Options{Random: rnd.Float64})
		require.NoError(t, err)
		n := map[string]int{}
		for range 10_000 {
			m, ok := tb.Resolve("llama")
			require.True(t, ok)
			n[m]++
		}
		return n
	}
	a, b := run(), run()
	require.Equal(t, a, b, "the same seed gives the same split")
	require.Equal(t, 10_000, a["llama-v1"]+a["llama-v2"])
	require.InDelta(t, 9_000, a["llama-v1"], 300, "90 %% of 10,000 draws, within 3 standard deviations")
}

func TestTableBoundaries(t *testing.T) {
	x := 0.0
	tb, err := NewTable(canary(), Options{Random: func() float64 { return x }})
	require.NoError(t, err)
	for _, c := range []struct {
		x    float64
		want string
	}{{0, "llama-v1"}, {0.8999, "llama-v1"}, {0.9, "llama-v2"}, {0.99999, "llama-v2"}} {
		x = c.x
		m, _ := tb.Resolve("llama")
		require.Equal(t, c.want, m, "draw %v", c.x)
	}
	x = 0.5
	m, _ := tb.Resolve("even")
	require.Equal(t, "b", m, "weights omitted split evenly")
	m, ok := tb.Resolve("chat")
	require.True(t, ok)
	require.Equal(t, "llama-v1", m, "an alias")
	m, ok = tb.Resolve("unknown")
	require.False(t, ok)
	require.Equal(t, "unknown", m)
	var nilTable *Table
	m, ok = nilTable.Resolve("x")
	require.Equal(t, "x", m)
	require.False(t, ok)
}

// A Table counts the rewrites applied to requests (Applied), by target,
// not the draws of Resolve: a caller refuses some requests after the draw
// (no endpoint serves the target), and those were not rewritten. A pair no
// rule holds is not counted: the labels take configured names only.
func TestTableCountsAppliedRewritesByTarget(t *testing.T) {
	reg := prometheus.NewRegistry()
	x := 0.95
	tb, err := NewTable(canary(), Options{Random: func() float64 { return x }, Set: setWith(reg)})
	require.NoError(t, err)
	total := func() float64 {
		mfs, err := reg.Gather()
		require.NoError(t, err)
		sum := 0.0
		for _, mf := range mfs {
			for _, m := range mf.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
		}
		return sum
	}
	for range 3 {
		tb.Resolve("llama")
	}
	require.Zero(t, total(), "a draw is no rewrite")
	m, _ := tb.Resolve("llama")
	tb.Applied("llama", m)
	tb.Applied("llama", m)
	x = 0.1
	m, _ = tb.Resolve("llama")
	tb.Applied("llama", m)
	tb.Applied("nope", "llama-v1")
	tb.Applied("llama", "nope")
	var nilTable *Table
	nilTable.Applied("llama", "llama-v1")
	require.InDelta(t, 2, testutil.ToFloat64(mustVec(t, reg).WithLabelValues("llama", "llama-v2")), 0)
	require.InDelta(t, 1, testutil.ToFloat64(mustVec(t, reg).WithLabelValues("llama", "llama-v1")), 0)
	require.InDelta(t, 3, total(), 0)
	require.Equal(t, 5, testutil.CollectAndCount(mustVec(t, reg)), "one series per configured target, none for unknown names")
}

func TestTableRejectsBadRules(t *testing.T) {
	for name, rules := range map[string][]Rule{
		"empty model":     {{Model: "", Targets: []Target{{Model: "a"}}}},
		"no targets":      {{Model: "a"}},
		"twice":           {{Model: "a", Targets: []Target{{Model: "b"}}}, {Model: "a", Targets: []Target{{Model: "c"}}}},
		"negative weight": {{Model: "a", Targets: []Target{{Model: "b", Weight: -1}}}},
		"comma in name":   {{Model: "a,b", Targets: []Target{{Model: "b"}}}},
		"control char":    {{Model: "a", Targets: []Target{{Model: "b\n"}}}},
		"invalid UTF-8":   {{Model: "caf\xe9", Targets: []Target{{Model: "b"}}}},
		"target UTF-8":    {{Model: "a", Targets: []Target{{Model: "\xff"}}}},
		"format rune":     {{Model: "a\u200bb", Targets: []Target{{Model: "b"}}}},
		"C1 control":      {{Model: "a", Targets: []Target{{Model: "b\u0085"}}}},
		// A weight left out among weights set (as the Inference
		// Extension's InferenceModelRewrite refuses it): a canary drained
		// to weight 0 beside a weight of 100 would still get 1 request in
		// 101, as a weight left out counts 1.
		"weight left out among weights": {{Model: "a", Targets: []Target{{Model: "b", Weight: 100}, {Model: "c", Weight: 0}}}},
		"first weight left out":         {{Model: "a", Targets: []Target{{Model: "b"}, {Model: "c", Weight: 5}}}},
	} {
		_, err := NewTable(rules, Options{})
		require.ErrorIs(t, err, ErrInvalidConfig, name)
	}
}

// A rewrite rule whose model or target is not valid UTF-8 is a
// configuration error, not a panic when its series are made (a label
// value must be UTF-8); a name from a label or an engine that is not is
// dropped like any other invalid one, and printable Unicode is kept.
func TestNonUTF8NameIsInvalidNotAPanic(t *testing.T) {
	for _, cfg := range []Config{
		{Rewrites: []Rule{{Model: "caf\xe9", Targets: []Target{{Model: "llama"}}}}},
		{Rewrites: []Rule{{Model: "llama", Targets: []Target{{Model: "caf\xe9"}}}}},
		{Served: map[string][]string{"10.0.0.1:8000": {"caf\xe9"}}},
	} {
		require.NotPanics(t, func() {
			_, err := New(cfg, Options{Set: setWith(prometheus.NewRegistry())})
			require.ErrorIs(t, err, ErrInvalidConfig)
		})
	}
	names, dropped := ParseList("caf\xe9,café,模型", 0)
	require.Equal(t, []string{"café", "模型"}, names)
	require.Equal(t, 1, dropped)
}
