package affinity

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/telemetry"
)

// gatheredFamilies returns how many metric families reg gathers.
func gatheredFamilies(t *testing.T, reg *prometheus.Registry) int {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	return len(mfs)
}

// TestCloseUnregisters checks the registration policy: New registers the
// decision counter, Close unregisters it, a Filter built again on the same
// registry registers without error, and a Filter that reused another's
// counter leaves it registered when it closes.
func TestCloseUnregisters(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"defaults", DefaultConfig()},
		{"zero config", Config{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			opts := Options{Set: telemetry.Set{Registerer: reg}}
			for range 2 {
				f, err := New(tc.cfg, opts)
				require.NoError(t, err)
				require.Equal(t, 1, gatheredFamilies(t, reg), "counter not registered")
				f.Close()
				require.Zero(t, gatheredFamilies(t, reg), "counter left after Close")
				f.Close() // idempotent
			}

			owner, err := New(tc.cfg, opts)
			require.NoError(t, err)
			sharer, err := New(tc.cfg, opts)
			require.NoError(t, err, "a second Filter reuses the registered counter")
			sharer.Close()
			require.Equal(t, 1, gatheredFamilies(t, reg), "the sharer's Close removed the owner's counter")
			owner.Close()
			require.Zero(t, gatheredFamilies(t, reg))
		})
	}
	// Without a registerer Close has nothing to unregister.
	f, err := New(Config{}, Options{})
	require.NoError(t, err)
	f.Close()
}
