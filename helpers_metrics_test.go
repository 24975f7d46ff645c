package kvroute

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
)

// gathered returns the value of the counter or gauge series of name whose
// single label has value label ("" for any series), gathered from a real
// registry; ok is false when the series does not exist.
func gathered(t *testing.T, reg *prometheus.Registry, name, label string) (float64, bool) {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if label != "" && (len(m.GetLabel()) != 1 || m.GetLabel()[0].GetValue() != label) {
				continue
			}
			return m.GetCounter().GetValue() + m.GetGauge().GetValue(), true // the other one is nil: 0
		}
	}
	return 0, false
}
