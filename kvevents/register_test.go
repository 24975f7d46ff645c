package kvevents

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/telemetry"
)

// gatheredFamilies returns how many metric families reg gathers.
func gatheredFamilies(t *testing.T, reg *prometheus.Registry) int {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	return len(mfs)
}

// TestPoolCloseUnregisters checks the registration policy: NewPool
// registers the Pool's metrics, Close unregisters exactly those, a Pool
// built again on the same registry registers without error, and a Pool that
// reused another's collectors leaves them registered when it closes.
func TestPoolCloseUnregisters(t *testing.T) {
	defer leakcheck.Check(t)()
	for _, tc := range []struct {
		name string
		cfg  PoolConfig
	}{
		{"dial", PoolConfig{TailProbeDelay: -1}},
		{"bind", PoolConfig{BindAddress: "127.0.0.1:0", TailProbeDelay: -1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ix := newPoolIndex(t)
			reg := prometheus.NewRegistry()
			opts := Options{Set: telemetry.Set{Registerer: reg}}
			// started waits for a bind-mode Pool's listener: closing one
			// that is still starting it races in internal/zmqx's acceptor
			// (its stop func is assigned after context.AfterFunc may run).
			started := func(p *Pool) {
				if tc.cfg.BindAddress != "" {
					require.Eventually(t, func() bool { return p.bindAddr() != "" }, poolWait, poolTick)
				}
			}
			for range 2 {
				p, err := NewPool(tc.cfg, ix, opts)
				require.NoError(t, err)
				started(p)
				require.NotZero(t, gatheredFamilies(t, reg), "metrics not registered")
				require.NoError(t, p.Close())
				require.Zero(t, gatheredFamilies(t, reg), "metrics left after Close")
				require.NoError(t, p.Close()) // idempotent
			}

			owner, err := NewPool(tc.cfg, ix, opts)
			require.NoError(t, err)
			started(owner)
			n := gatheredFamilies(t, reg)
			sharer, err := NewPool(tc.cfg, ix, opts)
			require.NoError(t, err, "a second Pool reuses the registered collectors")
			started(sharer)
			require.NoError(t, sharer.Close())
			require.Equal(t, n, gatheredFamilies(t, reg), "the sharer's Close removed the owner's metrics")
			require.NoError(t, owner.Close())
			require.Zero(t, gatheredFamilies(t, reg))
		})
	}
}
