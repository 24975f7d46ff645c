package regtest

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
)

// TB is the part of testing.TB the checks need.
type TB interface {
	Helper()
	Errorf(format string, args ...any)
	FailNow()
}

// Families returns how many metric families g gathers, failing t if
// gathering fails (a collector that breaks the registry's consistency
// checks).
func Families(t TB, g prometheus.Gatherer) int {
	t.Helper()
	mfs, err := g.Gather()
	require.NoError(t, err)
	return len(mfs)
}

// CloseUnregisters runs the registration cycle twice on one fresh
// registry: build (given the registry; it fails t itself if the component
// cannot be built) must register at least one family, the close it returns
// must leave none, and a second close must do nothing. It returns the
// registry for checks of the caller's own, such as collectors shared
// between two components.
func CloseUnregisters(t TB, build func(reg *prometheus.Registry) (close func())) *prometheus.Registry {
	t.Helper()
	reg := prometheus.NewRegistry()
	for range 2 {
		closeIt := build(reg)
		require.NotZero(t, Families(t, reg), "metrics not registered")
		closeIt()
		require.Zero(t, Families(t, reg), "metrics left after Close")
		closeIt() // idempotent
	}
	return reg
}

// ByLabel returns the values of metric name's series that g gathers (a
// counter's or a gauge's), keyed by the value of their label: the per
// endpoint view a test of a labelled metric checks. Series without the
// label are left out.
func ByLabel(t TB, g prometheus.Gatherer, name, label string) map[string]float64 {
	t.Helper()
	mfs, err := g.Gather()
	require.NoError(t, err)
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label {
					out[l.GetValue()] = m.GetCounter().GetValue() + m.GetGauge().GetValue()
				}
			}
		}
	}
	return out
}
