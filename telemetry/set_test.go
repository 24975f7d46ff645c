package telemetry

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
)

func TestZeroSetIsQuiet(t *testing.T) {
	var s Set
	s.Log().Info("discarded")
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
