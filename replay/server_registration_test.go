package replay

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/internal/regtest"
	"github.com/kvroute/kvroute/telemetry"
)

// TestServerCloseUnregistersMetrics checks the registration policy: Close
// unregisters what NewServer registered, so a second server can be built on
// the same registry.
func TestServerCloseUnregistersMetrics(t *testing.T) {
	defer leakcheck.Check(t)()
	regtest.CloseUnregisters(t, func(reg *prometheus.Registry) func() {
		srv, err := NewServer(ServerConfig{Addr: "127.0.0.1:0"}, NewBuffer(1), Options{Set: telemetry.Set{Registerer: reg}})
		require.NoError(t, err)
		return func() { require.NoError(t, srv.Close()) }
	})
}
