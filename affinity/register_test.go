package affinity

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/regtest"
	"github.com/kvroute/kvroute/telemetry"
)

// TestCloseUnregisters checks the registration policy: New registers the
// decision counter, Close unregisters it, a Filter built again on the same
// registry registers without error, and the counter two Filters share
// stays registered until both have closed.
func TestCloseUnregisters(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"defaults", DefaultConfig()},
		{"zero config", Config{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := regtest.CloseUnregisters(t, func(reg *prometheus.Registry) func() {
				f, err := New(tc.cfg, Options{Set: telemetry.Set{Registerer: reg}})
				require.NoError(t, err)
				require.Equal(t, 1, regtest.Families(t, reg), "one counter, the decisions")
				return f.Close
			})
			opts := Options{Set: telemetry.Set{Registerer: reg}}

			owner, err := New(tc.cfg, opts)
			require.NoError(t, err)
			sharer, err := New(tc.cfg, opts)
			require.NoError(t, err, "a second Filter reuses the registered counter")
			sharer.Close()
			require.Equal(t, 1, regtest.Families(t, reg), "the sharer's Close removed the owner's counter")
			owner.Close()
			require.Zero(t, regtest.Families(t, reg))
		})
	}
	// Without a registerer Close has nothing to unregister.
	f, err := New(Config{}, Options{})
	require.NoError(t, err)
	f.Close()
}

// Filters sharing a registry's decision counter keep it registered until
// the last of them closes, whichever registered it: when the registrant
// closes first (its router rebuilt), the others' decisions are still
// exported, and a Filter built afterwards reuses the same counter.
func TestSharedCounterOutlivesItsRegistrant(t *testing.T) {
	reg := prometheus.NewRegistry()
	opts := Options{Set: telemetry.Set{Registerer: reg}}
	owner, err := New(Config{}, opts)
	require.NoError(t, err)
	sharer, err := New(Config{}, opts)
	require.NoError(t, err)
	owner.Close()
	require.Equal(t, 1, regtest.Families(t, reg), "the registrant's Close removed the sharer's counter")
	rebuilt, err := New(Config{}, opts)
	require.NoError(t, err)

	sharer.Apply(nil, 0, nil)  // not_applicable
	rebuilt.Apply(nil, 0, nil) // not_applicable
	require.Equal(t, 2.0, testutil.ToFloat64(sharer.decisions[OutcomeNotApplicable]))
	require.Same(t, sharer.counter, rebuilt.counter)
	mfs, err := reg.Gather()
	require.NoError(t, err)
	require.Len(t, mfs, 1)
	var exported float64
	for _, m := range mfs[0].GetMetric() {
		exported += m.GetCounter().GetValue()
	}
	require.Equal(t, 2.0, exported, "both Filters' decisions are in the registry")

	sharer.Close()
	sharer.Close() // idempotent: one release
	require.Equal(t, 1, regtest.Families(t, reg), "rebuilt still uses the counter")
	rebuilt.Close()
	require.Zero(t, regtest.Families(t, reg), "the last user's Close unregisters it")
	again, err := New(Config{}, opts)
	require.NoError(t, err)
	require.Equal(t, 1, regtest.Families(t, reg))
	again.Close()
	require.Zero(t, regtest.Families(t, reg))
}

// A Filter reusing a counter registered other than by a Filter leaves it
// registered when it closes: the counter stays its registrant's.
func TestForeignDecisionCounterStaysRegistered(t *testing.T) {
	reg := prometheus.NewRegistry()
	foreign, _, err := decisionCounter(telemetry.Set{}) // built, not registered
	require.NoError(t, err)
	require.NoError(t, reg.Register(foreign))
	f, err := New(Config{}, Options{Set: telemetry.Set{Registerer: reg}})
	require.NoError(t, err)
	require.Nil(t, f.counter)
	f.Close()
	require.Equal(t, 1, regtest.Families(t, reg))
}
