package sim

import (
	"testing"
	"time"

	"github.com/kvroute/kvroute/affinity"
	"github.com/stretchr/testify/require"
)

// Each crowding experiment policy changes only its own setting of the
// affinity filter's crowding rule; kvroute runs the defaults, which lift
// the bound on the extra prefill on severe crowding.
func TestCrowdingVariants(t *testing.T) {
	def := affinity.DefaultConfig()
	require.Equal(t, affinity.DefaultCrowdingUnboundRatio, *def.CrowdingUnboundRatio)
	require.Positive(t, *def.CrowdingUnboundRatio, "the default lifts the bound on severe crowding")
	for _, tc := range []struct {
		p    Policy
		want func(*affinity.Config)
	}{
		{KVRoute, func(*affinity.Config) {}},
		{KVRouteCrowding, func(a *affinity.Config) { a.CrowdingMaxExtraPrefill = new(time.Duration(0)) }},
		{KVRouteNoCrowding, func(a *affinity.Config) { a.CrowdingRatio = new(0.0) }},
		{KVRouteBounded, func(a *affinity.Config) { a.CrowdingUnboundRatio = new(0.0) }},
	} {
		got, want := affinity.Config{}, affinity.DefaultConfig()
		crowdingVariant(&got, tc.p)
		tc.want(&want)
		require.Equal(t, want, got.WithDefaults(), tc.p)
		p, err := ParsePolicy(string(tc.p))
		require.NoError(t, err)
		require.Equal(t, tc.p, p)
		require.True(t, p.isKVRoute(), tc.p)
	}
}
