package gateway

import (
	"net"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/internal/leakcheck"
)

// A NewServer that fails after it built its Handler, here because its
// listen address is taken, closes the Handler too: the upstream pool's
// connections and warm-ahead dials to the endpoints it was given end with
// it, as they do when a running Server shuts down.
func TestNewServerFailingToListenClosesWhatItBuilt(t *testing.T) {
	defer leakcheck.Check(t)()
	u := newUpstream(t)
	defer u.Close()
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer taken.Close()
	cfg := testServerConfig(kvroute.Endpoint{ID: u.id})
	cfg.Listen = taken.Addr().String()
	_, err = NewServer(t.Context(), cfg, Options{})
	require.ErrorContains(t, err, "address already in use")
}
