package replay

import (
	"testing"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/telemetry"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
)

// TestServerCloseUnregistersMetrics checks the registration policy: Close
// unregisters what NewServer registered, so a second server can be built on
// the same registry.
func TestServerCloseUnregistersMetrics(t *testing.T) {
	defer leakcheck.Check(t)()
	reg := prometheus.NewRegistry()
	opts := Options{Set: telemetry.Set{Registerer: reg}}
	srv, err := NewServer(ServerConfig{Addr: "127.0.0.1:0"}, NewBuffer(1), opts)
	require.NoError(t, err)
	mfs, err := reg.Gather()
	require.NoError(t, err)
	require.NotEmpty(t, mfs)
	require.NoError(t, srv.Close())
	mfs, err = reg.Gather()
	require.NoError(t, err)
	require.Empty(t, mfs, "Close leaves no family registered")

	srv, err = NewServer(ServerConfig{Addr: "127.0.0.1:0"}, NewBuffer(1), opts)
	require.NoError(t, err, "a closed server can be built again on the same registry")
	require.NoError(t, srv.Close())
}
