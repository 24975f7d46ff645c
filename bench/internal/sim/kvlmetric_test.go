package sim

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/simengine"
)

// TestKVRouteLMetricPick: kvroute scoring the LMetric way keeps a request on
// the endpoint holding 12 of its 16 blocks while that endpoint's open
// requests are below the ratio of the cold endpoint's work to its own,
// where kvroute's default (below the affinity threshold, so the token-load
// score alone) leaves it as soon as one request is open there.
func TestKVRouteLMetricPick(t *testing.T) {
	cfg := DefaultConfig(MultiTurn, 1)
	ids := endpointIDs(2)
	now := func() time.Time { return simengine.DefaultStart }
	prompt := randTokens(rand.New(rand.NewPCG(1, 2)), 1024) // 16 blocks
	// Cold endpoint: (1,024 + 1) × 1. Warm one: (256 + 1) × (n + 1), below
	// up to n = 2 open requests. The default's token load: n × 1,024 + 256
	// against 1,024, below only at n = 0.
	for variant, want := range map[Policy][]int{
		KVRouteLMetric: {0, 0, 0, 1, 1},
		KVRoute:        {0, 1, 1, 1, 1},
	} {
		t.Run(string(variant), func(t *testing.T) {
			for n, w := range want {
				// A router of its own per round: a pick's speculative
				// entries would make the warm endpoint hold the whole prompt.
				k, err := newKVRouter(cfg, ids, now, 1, variant, nil, nil)
				require.NoError(t, err)
				k.r.Index().Speculate(ids[0], keysOf(nil, prompt, cfg.Fleet.BlockSize)[:12], time.Hour)
				for range n {
					k.r.Load().Dispatch(ids[0], 0)
				}
				rq := &request{arrival: arrival{prompt: prompt}}
				got, err := k.pick(rq)
				k.close()
				require.NoError(t, err)
				require.Equal(t, w, got, "warm endpoint with %d open requests", n)
			}
		})
	}
}
