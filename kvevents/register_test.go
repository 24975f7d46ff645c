package kvevents

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/internal/regtest"
	"github.com/kvroute/kvroute/telemetry"
)

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
			// started waits for a bind-mode Pool's listener: closing one
			// that is still starting it races in internal/zmqx's acceptor
			// (its stop func is assigned after context.AfterFunc may run).
			started := func(p *Pool) {
				if tc.cfg.BindAddress != "" {
					require.Eventually(t, func() bool { return p.bindAddr() != "" }, poolWait, poolTick)
				}
			}
			reg := regtest.CloseUnregisters(t, func(reg *prometheus.Registry) func() {
				p, err := NewPool(tc.cfg, ix, Options{Set: telemetry.Set{Registerer: reg}})
				require.NoError(t, err)
				started(p)
				return func() { require.NoError(t, p.Close()) }
			})
			opts := Options{Set: telemetry.Set{Registerer: reg}}

			owner, err := NewPool(tc.cfg, ix, opts)
			require.NoError(t, err)
			started(owner)
			n := regtest.Families(t, reg)
			sharer, err := NewPool(tc.cfg, ix, opts)
			require.NoError(t, err, "a second Pool reuses the registered collectors")
			started(sharer)
			require.NoError(t, sharer.Close())
			require.Equal(t, n, regtest.Families(t, reg), "the sharer's Close removed the owner's metrics")
			require.NoError(t, owner.Close())
			require.Zero(t, regtest.Families(t, reg))
		})
	}
}
