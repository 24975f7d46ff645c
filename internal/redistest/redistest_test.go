package redistest

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
)

func TestStartStopRestart(t *testing.T) {
	defer leakcheck.Check(t)()
	s := Start(t)
	require.NotEqual(t, 6379, s.Port)
	require.NoError(t, ping(s.Addr))
	require.NoError(t, s.Stop())
	require.Error(t, ping(s.Addr), "a stopped server must not answer")
	require.NoError(t, s.Stop(), "stopping twice is a no-op")
	require.NoError(t, s.Restart())
	require.NoError(t, ping(s.Addr), "restarted on the same port")
	require.NoError(t, s.Stop())
}

func TestStartCluster(t *testing.T) {
	defer leakcheck.Check(t)()
	c := StartCluster(t, 3)
	defer c.Stop()
	require.Len(t, c.Addrs, 3)
	for _, s := range c.Nodes {
		require.NoError(t, ping(s.Addr))
	}
}
