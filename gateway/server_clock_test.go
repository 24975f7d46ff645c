package gateway

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/kvindex"
	"github.com/kvroute/kvroute/telemetry"
)

// A Server's clock is its handler's and the Router's it builds: the
// handler reads its time, and the Router's speculative entries expire when
// a manual clock passes their TTL, not when wall time does.
func TestServerClockReachesTheRouter(t *testing.T) {
	defer leakcheck.Check(t)()
	clk := telemetry.NewManual(time.Unix(1_800_000_000, 0))
	rcfg := kvroute.DefaultConfig()
	rcfg.Model = testModel
	rcfg.Events.Enabled = new(false)
	s, err := NewServer(context.Background(), ServerConfig{Listen: "127.0.0.1:0", Router: rcfg},
		Options{Set: telemetry.Set{Clock: clk}})
	require.NoError(t, err)
	defer func() { require.NoError(t, s.Shutdown(context.Background())) }()
	require.Equal(t, clk.Now(), s.Handler().now(), "the handler's latency clock")

	ix := s.Router().Index()
	tokens := make([]uint32, 4*ix.BlockSize())
	for i := range tokens {
		tokens[i] = uint32(i + 1)
	}
	keys := kvindex.Keys(nil, tokens, ix.BlockSize(), &kvindex.KeyParams{Model: testModel})
	ix.Speculate("10.0.0.1:8000", keys, time.Minute)
	require.Zero(t, ix.Sweep())
	require.Equal(t, len(keys), ix.Stats().Speculative)
	clk.Advance(time.Minute)
	ix.Sweep()
	require.Zero(t, ix.Stats().Speculative, "expired on the Server's clock")
}
