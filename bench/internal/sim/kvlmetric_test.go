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

// TestLoadTieTolerancePassedToKVRoute: Config.LoadTieTolerance reaches the
// kvroute Router of every kvroute policy. A new prompt with half a prompt
// of load on one of two endpoints goes to the other without a tolerance,
// and to the same endpoint (its prefix hash's), whichever holds the load,
// with a tolerance of two prompts (the load is 512 tokens plus the open
// request's 1,024).
func TestLoadTieTolerancePassedToKVRoute(t *testing.T) {
	cfg := DefaultConfig(SharedPrefix, 1)
	ids := endpointIDs(2)
	now := func() time.Time { return simengine.DefaultStart }
	prompt := randTokens(rand.New(rand.NewPCG(3, 4)), 1024)
	for _, tol := range []float64{0, 2} {
		cfg.LoadTieTolerance = tol
		var got [2]int
		for loaded := range got {
			k, err := newKVRouter(cfg, ids, now, 1, KVRoute, nil, nil)
			require.NoError(t, err)
			k.r.Load().Dispatch(ids[loaded], 512)
			got[loaded], err = k.pick(&request{arrival: arrival{prompt: prompt}})
			k.close()
			require.NoError(t, err)
		}
		if tol == 0 {
			require.Equal(t, [2]int{1, 0}, got, "the least-loaded endpoint")
		} else {
			require.Equal(t, got[0], got[1], "the prefix hash's endpoint, within the tolerance")
		}
	}
}

// TestPeerLoadFromMetricsSteersKVRoute: with
// Config.KVRoutePeerLoadFromMetrics a kvroute router's pick sees another
// replica's requests in the engines' scraped queues, at most a scrape
// interval old: a new prompt goes away from the engine the router alone,
// which has sent nothing, would take, once its queue holds another
// replica's requests.
func TestPeerLoadFromMetricsSteersKVRoute(t *testing.T) {
	cfg := DefaultConfig(NoReuse, 1)
	ids := endpointIDs(2)
	clock := simengine.DefaultStart
	now := func() time.Time { return clock }
	prompt := randTokens(rand.New(rand.NewPCG(5, 6)), 1024)
	var queues [2][2]int // waiting, running per engine
	queue := func(i int) (int, int) { return queues[i][0], queues[i][1] }
	newRouter := func() *kvrouter {
		k, err := newKVRouter(cfg, ids, now, 1, KVRoute, nil, nil)
		require.NoError(t, err)
		return k
	}
	pickOf := func(k *kvrouter) int {
		got, err := k.pick(&request{arrival: arrival{prompt: prompt}})
		require.NoError(t, err)
		return got
	}
	alone := newRouter()
	first := pickOf(alone)
	alone.close()

	queues[first] = [2]int{3, 1} // three waiting and one running there, none this router's
	k := newRouter()
	defer k.close()
	k.scrapePeers(queue, now, cfg.ScrapeInterval)
	require.Equal(t, 1-first, pickOf(k), "the engine no other replica loads")
	require.Equal(t, int64(4), k.r.Load().PeerLoadOf(ids[first]).Requests)
	queues[first] = [2]int{0, 0} // the other replica's requests end
	pickOf(k)
	require.Equal(t, int64(4), k.r.Load().PeerLoadOf(ids[first]).Requests, "the estimate holds until the next scrape")
	clock = clock.Add(cfg.ScrapeInterval)
	pickOf(k)
	require.Zero(t, k.r.Load().PeerLoadOf(ids[first]).Requests)
}
