package telemetry

import (
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
)

func TestZeroSetIsQuiet(t *testing.T) {
	var s Set
	s.Log().Info("discarded")
	require.False(t, s.Log().Enabled(t.Context(), slog.LevelError), "no logger: records are dropped before they are formatted")
	_, span := s.Tracer("t").Start(t.Context(), "x")
	span.End()
	require.False(t, span.SpanContext().IsValid(), "no provider, no spans")
	require.Equal(t, Wall, s.Clk())
	require.NoError(t, s.Register(prometheus.NewCounter(prometheus.CounterOpts{Name: "c"})))
	require.True(t, s.Unregister(prometheus.NewCounter(prometheus.CounterOpts{Name: "c"})))
}

func TestRegisterIsAllOrNone(t *testing.T) {
	reg := prometheus.NewRegistry()
	s := Set{Registerer: reg}
	taken := prometheus.NewCounter(prometheus.CounterOpts{Name: "taken_total", Help: "h"})
	require.NoError(t, s.Register(taken))
	fresh := prometheus.NewCounter(prometheus.CounterOpts{Name: "fresh_total", Help: "h"})
	again := prometheus.NewCounter(prometheus.CounterOpts{Name: "taken_total", Help: "h"})
	err := s.Register(fresh, again)
	require.True(t, IsAlreadyRegistered(err), "%v", err)
	n, err := testutil.GatherAndCount(reg)
	require.NoError(t, err)
	require.Equal(t, 1, n, "the failed call unregistered what it had registered")
}

func TestWithLabelsEveryMetric(t *testing.T) {
	reg := prometheus.NewRegistry()
	s := Set{Registerer: reg}.With(prometheus.Labels{"pool": "a"})
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "x_total", Help: "h"})
	require.NoError(t, s.Register(c))
	mfs, err := reg.Gather()
	require.NoError(t, err)
	require.Equal(t, "pool", mfs[0].GetMetric()[0].GetLabel()[0].GetName())
}

// RegisterCounters exports each atomic as a counter read at scrape time,
// registers all or none, and without a registerer registers nothing.
func TestRegisterCounters(t *testing.T) {
	var a, b atomic.Uint64
	reg := prometheus.NewRegistry()
	set := Set{Registerer: reg}
	cs, err := set.RegisterCounters(Counter{Name: "t_a_total", Help: "a", Value: &a}, Counter{Name: "t_b_total", Help: "b", Value: &b})
	require.NoError(t, err)
	require.Len(t, cs, 2)
	a.Add(3)
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader("# HELP t_a_total a\n# TYPE t_a_total counter\nt_a_total 3\n"), "t_a_total"))

	// t_b_total is taken: nothing of this call stays registered.
	_, err = set.RegisterCounters(Counter{Name: "t_c_total", Help: "c", Value: &a}, Counter{Name: "t_b_total", Help: "b", Value: &b})
	require.Error(t, err)
	n, err := testutil.GatherAndCount(reg, "t_c_total")
	require.NoError(t, err)
	require.Zero(t, n)

	require.True(t, set.Unregister(cs...))
	none, err := Set{}.RegisterCounters(Counter{Name: "t_a_total", Help: "a", Value: &a})
	require.NoError(t, err)
	require.Nil(t, none)
}
