package kvroute

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/internal/testport"
	"github.com/kvroute/kvroute/render"
	"github.com/kvroute/kvroute/simengine"
	"github.com/kvroute/kvroute/simengine/server"
)

// hybridFleetEngine starts a simulated engine publishing its KV events over
// ZeroMQ on loopback, with hybrid mode h (nil: full attention only); id is
// the endpoint's ip:port.
func hybridFleetEngine(t *testing.T, id string, h *simengine.HybridConfig) *fleetEngine {
	t.Helper()
	e := &fleetEngine{t: t, id: id, events: "tcp://" + testport.Addr(t), replay: "tcp://" + testport.Addr(t)}
	var err error
	e.srv, err = server.New(server.Config{
		Model: testModel,
		Engine: simengine.Config{BlockSize: fleetBS, NumGPUBlocks: 300, PrefillTokensPerSecond: 1e7,
			DecodeStep: 100 * time.Microsecond, Hybrid: h},
		KVEvents: server.KVEventsConfig{EnableKVCacheEvents: true, Publisher: "zmq", Endpoint: e.events,
			ReplayEndpoint: &e.replay, BufferSteps: 1024, Topic: "kv@" + id + "@" + testModel},
	}, server.Options{})
	require.NoError(t, err)
	e.events, e.replay = e.srv.KVEventsEndpoint(), e.srv.ReplayEndpoint()
	return e
}

// Engines of a Gemma-3-like model, whose window layers vLLM splits into
// five sliding-window groups (numbered 0 to 4, full attention 5), and of
// one with three window groups after full attention and a Mamba group,
// publish over ZeroMQ into a Router; the groups share one block pool, so
// one group loses blocks the others hold. After every round, Pick predicts
// for each engine exactly the prefix the engine would reuse: one that
// every window group (and the Mamba group) can serve.
func TestPickOnHybridEnginesWithSeveralWindowGroupsIsExact(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	engines := []*fleetEngine{
		hybridFleetEngine(t, testport.Addr(t), &simengine.HybridConfig{SlidingWindow: 40, WindowGroups: 5,
			GroupOrder: simengine.OrderWindowFirst}),
		hybridFleetEngine(t, testport.Addr(t), &simengine.HybridConfig{SlidingWindow: 33, WindowGroups: 3,
			Mamba: true}),
		hybridFleetEngine(t, testport.Addr(t), nil),
	}
	defer func() {
		for _, e := range engines {
			e.stop()
		}
	}()
	r, reg := fleetRouter(t, engines, nil)
	defer r.Close()
	for _, e := range engines {
		e.waitSubscribers(1)
	}
	caughtUp(t, r, engines...)

	rng := rand.New(rand.NewPCG(3, 17))
	prefixes := make([][]uint32, 5)
	for i := range prefixes {
		prefixes[i] = prompt(100+i, 64+rng.IntN(200))
	}
	var probes [][]uint32
	nonzero, limited := 0, 0
	for round := 0; round < 12; round++ {
		var wg sync.WaitGroup
		for k := 0; k < 4; k++ {
			p := append(append([]uint32(nil), prefixes[rng.IntN(len(prefixes))]...), prompt(1000+round*4+k, 20+rng.IntN(200))...)
			probes = append(probes, p)
			mt := 1 + rng.IntN(20)
			for _, e := range engines {
				wg.Add(1)
				_, err := e.srv.Engine().Submit(simengine.Request{Prompt: p, MaxTokens: mt, OnDone: func(simengine.Result) { wg.Done() }})
				require.NoError(t, err)
			}
		}
		wg.Wait()
		caughtUp(t, r, engines...)
		for _, p := range probes {
			for _, e := range engines {
				d, err := r.Pick(context.Background(), &Request{Prompts: []render.Prompt{{TokenIDs: p}}}, []Endpoint{e.endpoint()})
				require.NoError(t, err)
				want := e.srv.Engine().CachedTokens(p)
				require.Equal(t, want, d.CachedTokens, "round %d: engine %s", round, e.id)
				d.Done(DoneInfo{})
				if want > 0 {
					nonzero++
				}
			}
			if engines[0].srv.Engine().CachedTokens(p) < engines[2].srv.Engine().CachedTokens(p) {
				limited++
			}
		}
	}
	t.Logf("non-zero predictions %d; probes the window groups cut short: %d", nonzero, limited)
	require.NotZero(t, limited, "the window groups evicted on their own")
	require.Greater(t, nonzero, 100)
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if n := mf.GetName(); n == "llm_d_epp_kv_cache_events_stores_skipped_total" || n == "kvroute_kv_events_dropped_total" {
			for _, m := range mf.GetMetric() {
				if m.GetLabel()[len(m.GetLabel())-1].GetValue() == "already_applied" {
					continue // a live message a replay applied first, when the stream joined
				}
				require.Zero(t, m.GetCounter().GetValue(), "%s %v", n, m.GetLabel())
			}
		}
	}
}
