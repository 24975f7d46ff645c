package sim

import (
	"os"
	"strconv"
	"testing"
	"time"
)

// TestFirstDivergenceFromOneRouter is a diagnostic, run on demand
// (KVROUTE_SIM_DIVERGE=<seeds>): for each seed it runs one router and four
// replicas of the modelled pool on shared-prefix at 1.5× and logs the first
// pick where they part, with the time since the pick before it, each
// pick's outcome and, per engine, the load the replica saw against the
// fleet's exact load (a negative difference: a peer's dispatch not yet
// received; positive: a peer's first chunk or end not yet received).
func TestFirstDivergenceFromOneRouter(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("KVROUTE_SIM_DIVERGE"))
	if n <= 0 {
		t.Skip("diagnostic: set KVROUTE_SIM_DIVERGE to the number of seeds")
	}
	for seed := uint64(1); seed <= uint64(n); seed++ {
		trace := func(r int) *diagnostics {
			cfg := exactConfig(r, SharedExact{})
			if cfg.SharedState != nil {
				if d, err := time.ParseDuration(os.Getenv("KVROUTE_SIM_DIVERGE_PUBLISH")); err == nil {
					cfg.SharedState.PublishInterval = d
				}
				if d, err := time.ParseDuration(os.Getenv("KVROUTE_SIM_DIVERGE_RTT")); err == nil {
					cfg.SharedState.RedisRTT = d
				}
			}
			cfg.Workload.Requests, cfg.Seed = DefaultWorkload(SharedPrefix).Requests, seed
			d := &diagnostics{}
			_, err := runWith(cfg, KVRoute, d)
			if err != nil {
				t.Fatal(err)
			}
			return d
		}
		one, four := trace(1), trace(4)
		for i := range one.picks {
			a, b := one.picks[i], four.picks[i]
			if a.engine == b.engine {
				continue
			}
			diff := make([]int64, len(b.tokens))
			rdiff := make([]int64, len(b.tokens))
			for e := range diff {
				diff[e] = b.tokens[e] - b.exact[e]
				rdiff[e] = b.requests[e] - a.requests[e]
			}
			var gap any = "-"
			if i > 0 {
				gap = a.at - one.picks[i-1].at
			}
			t.Logf("seed %d: pick %d at %v (%v after the previous): one router -> engine %d (%s), replica %d -> engine %d (%s); seen - exact tokens per engine %v; requests seen - one router's %v; one router's tokens %v",
				seed, i, a.at, gap, a.engine, a.outcome, b.replica, b.engine, b.outcome, diff, rdiff, a.tokens)
			break
		}
	}
}
