package regtest

import (
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
)

// recorder is a TB that records what a check reports instead of failing.
type recorder struct{ errs []string }

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}
func (r *recorder) FailNow() {}

// A component whose Close leaves its collector registered, or that
// registers nothing, fails the cycle with a message that says which.
func TestCloseUnregistersReportsWhatIsWrong(t *testing.T) {
	counter := func() prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Name: "regtest_total", Help: "h"})
	}
	var leaky recorder
	CloseUnregisters(&leaky, func(reg *prometheus.Registry) func() {
		_ = reg.Register(counter()) // the second build finds it still registered
		return func() {}
	})
	require.True(t, strings.Contains(strings.Join(leaky.errs, "\n"), "metrics left after Close"), leaky.errs)

	var silent recorder
	CloseUnregisters(&silent, func(*prometheus.Registry) func() { return func() {} })
	require.True(t, strings.Contains(strings.Join(silent.errs, "\n"), "metrics not registered"), silent.errs)

	var good recorder
	CloseUnregisters(&good, func(reg *prometheus.Registry) func() {
		c := counter()
		require.NoError(t, reg.Register(c))
		return func() { reg.Unregister(c) }
	})
	require.Empty(t, good.errs)
}

// ByLabel reads a labelled gauge's and counter's series by their label's
// value, leaving out other metrics and series without the label.
func TestByLabel(t *testing.T) {
	reg := prometheus.NewRegistry()
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "g", Help: "h"}, []string{"endpoint"})
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "c_total", Help: "h"}, []string{"endpoint", "reason"})
	reg.MustRegister(g, c)
	g.WithLabelValues("a").Set(2)
	g.WithLabelValues("b").Set(0)
	c.WithLabelValues("a", "x").Add(3)
	require.Equal(t, map[string]float64{"a": 2, "b": 0}, ByLabel(t, reg, "g", "endpoint"))
	require.Equal(t, map[string]float64{"x": 3}, ByLabel(t, reg, "c_total", "reason"))
	require.Empty(t, ByLabel(t, reg, "g", "reason"))
}
