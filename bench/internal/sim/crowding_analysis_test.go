package sim

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// crowdGroup accumulates one group of requests of an analysis: how many,
// their uncached prompt tokens as the router projected them on the chosen
// engine, and their TTFTs.
type crowdGroup struct {
	n        int
	uncached int64
	ttft     []time.Duration
}

func (g *crowdGroup) add(uncached int64, ttft time.Duration) {
	g.n++
	g.uncached += uncached
	g.ttft = append(g.ttft, ttft)
}

func (g *crowdGroup) String() string {
	if g.n == 0 {
		return "0"
	}
	slices.Sort(g.ttft)
	q := func(p float64) time.Duration { return g.ttft[min(int(p*float64(len(g.ttft))), len(g.ttft)-1)] }
	return fmt.Sprintf("%d (mean uncached %d tokens; TTFT p50 %v p90 %v)", g.n, g.uncached/int64(g.n),
		q(0.5).Round(time.Millisecond), q(0.9).Round(time.Millisecond))
}

// analysisEnv reads a comma-separated list from the environment.
func analysisEnv(t *testing.T, key string) []string {
	v := os.Getenv(key)
	if v == "" {
		return nil
	}
	return strings.Split(v, ",")
}

func analysisLoads(t *testing.T, key string) []float64 {
	var out []float64
	for _, s := range analysisEnv(t, key) {
		l, err := strconv.ParseFloat(s, 64)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, l)
	}
	return out
}

// TestCrowdingAnalysisOverload splits the overload study's requests by
// class and by the affinity filter's outcome: which requests the crowding
// rule moves, how many uncached tokens they carry to the engine they move
// to, and their TTFT against the requests that stayed. It is an analysis,
// not a check, and CPU heavy: it runs only when KVROUTE_CROWDING_OVERLOAD
// lists loads, e.g.
//
//	KVROUTE_CROWDING_OVERLOAD=0.5,2 KVROUTE_CROWDING_POLICIES=kvroute,kvroute-crowding \
//	  nice -n 10 go test -run CrowdingAnalysisOverload -v -count=1 ./bench/internal/sim/
//
// KVROUTE_CROWDING_ADMISSION=0 runs the kvroute row (no admission) instead
// of kvroute+admission. The capacity is the committed study's. A load of 0
// runs MeasureCapacity's probe instead (kvroute without admission, the
// fleet kept backlogged) and logs the capacity it measures.
func TestCrowdingAnalysisOverload(t *testing.T) {
	loads := analysisLoads(t, "KVROUTE_CROWDING_OVERLOAD")
	if len(loads) == 0 {
		t.Skip("set KVROUTE_CROWDING_OVERLOAD to run this analysis")
	}
	policies := analysisEnv(t, "KVROUTE_CROWDING_POLICIES")
	if len(policies) == 0 {
		policies = []string{string(KVRoute), string(KVRouteCrowding)}
	}
	op := OverloadAdmission
	if os.Getenv("KVROUTE_CROWDING_ADMISSION") == "0" {
		op = OverloadKVRoute
	}
	for _, l := range loads {
		for _, ps := range policies {
			p, err := ParsePolicy(ps)
			if err != nil {
				t.Fatal(err)
			}
			oc := DefaultOverloadConfig(l)
			oc.Capacity = committedOverloadCapacity
			oc.KVRoute = p
			op := op
			if l == 0 { // MeasureCapacity's probe
				oc.Load = 1
				cfg, err := oc.validate()
				if err != nil {
					t.Fatal(err)
				}
				oc.Capacity, oc.Load, op = cfg.Capacity(), capacityProbeLoad, OverloadKVRoute
			}
			res, reqs, err := runOverload(oc, op)
			if err != nil {
				t.Fatal(err)
			}
			groups := map[string]*crowdGroup{}
			var keys []string
			for _, rq := range reqs {
				if rq.decision == nil || rq.first.IsZero() {
					continue
				}
				k := rq.class + " " + rq.decision.Outcome.String()
				if groups[k] == nil {
					groups[k] = &crowdGroup{}
					keys = append(keys, k)
				}
				groups[k].add(rq.decision.UncachedTokens, rq.first.Sub(rq.arrived))
			}
			slices.Sort(keys)
			t.Logf("%s %s at %.2f×: interactive TTFT p90 %v, batch shed %d, completion rate %.1f/s, hit rate %.1f %%", op, p, l, res.InteractiveTTFTP90.Round(time.Millisecond), res.Batch.Shed,
				float64(res.Interactive.Completed+res.Batch.Completed)/res.Makespan.Seconds(), 100*res.HitRate)
			for _, k := range keys {
				t.Logf("  %-28s %v", k, groups[k])
			}
		}
	}
}

// committedOverloadCapacity is the capacity the committed overload study
// measured (bench/results/routesim-overload.json), so that an analysis's
// loads are the report's.
const committedOverloadCapacity = 119.0405333015892

// TestCrowdingAnalysisMultiTurn is the same split on the multi-turn
// workload, per seed: KVROUTE_CROWDING_MULTITURN lists loads,
// KVROUTE_CROWDING_SEEDS seeds (default 1), KVROUTE_CROWDING_WORKLOAD
// another synthetic workload (default multi-turn). KVROUTE_CROWDING_PICKS=N
// also prints the first N crowded picks: per engine, the blocks of the
// prompt it held at arrival, its open requests and its in-flight tokens as
// the router saw them (* marks the engine chosen).
func TestCrowdingAnalysisMultiTurn(t *testing.T) {
	loads := analysisLoads(t, "KVROUTE_CROWDING_MULTITURN")
	if len(loads) == 0 {
		t.Skip("set KVROUTE_CROWDING_MULTITURN to run this analysis")
	}
	policies := analysisEnv(t, "KVROUTE_CROWDING_POLICIES")
	if len(policies) == 0 {
		policies = []string{string(KVRoute), string(KVRouteCrowding)}
	}
	seeds := analysisEnv(t, "KVROUTE_CROWDING_SEEDS")
	if len(seeds) == 0 {
		seeds = []string{"1"}
	}
	for _, l := range loads {
		for _, ss := range seeds {
			seed, err := strconv.ParseUint(ss, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			for _, ps := range policies {
				p, err := ParsePolicy(ps)
				if err != nil {
					t.Fatal(err)
				}
				kind := MultiTurn
				if w := os.Getenv("KVROUTE_CROWDING_WORKLOAD"); w != "" {
					kind = WorkloadKind(w)
				}
				cfg := DefaultConfig(kind, l)
				cfg.Seed = seed
				d := &diagnostics{}
				res, err := runWith(cfg, p, d)
				if err != nil {
					t.Fatal(err)
				}
				groups := map[string]*crowdGroup{}
				var keys []string
				for _, rq := range d.reqs {
					if !rq.finished {
						continue
					}
					k := "other"
					if rq.decision != nil {
						k = rq.decision.Outcome.String()
					}
					if groups[k] == nil {
						groups[k] = &crowdGroup{}
						keys = append(keys, k)
					}
					var unc int64
					if rq.decision != nil {
						unc = rq.decision.UncachedTokens
					}
					groups[k].add(unc, rq.ttft)
				}
				slices.Sort(keys)
				t.Logf("%s %s at %.2f× seed %d: TTFT p90 %v, hit rate %.1f %%", kind, p, l, seed, res.TTFTP90.Round(time.Millisecond), 100*res.HitRate)
				for _, k := range keys {
					t.Logf("  %-16s %v", k, groups[k])
				}
				shown, _ := strconv.Atoi(os.Getenv("KVROUTE_CROWDING_PICKS"))
				for i, pk := range d.picks {
					if shown <= 0 {
						break
					}
					if pk.outcome != "crowded" || i >= len(d.reqs) {
						continue
					}
					shown--
					rq := d.reqs[i]
					var b strings.Builder
					for e := range pk.tokens {
						mark := " "
						if e == pk.engine {
							mark = "*"
						}
						held := 0
						if e < len(rq.note.blocks) {
							held = rq.note.blocks[e]
						}
						fmt.Fprintf(&b, " %s%d/%d:%d,%d", mark, held, rq.note.total, pk.requests[e], pk.tokens[e])
					}
					t.Logf("    crowded at %v turn %d, unc %d, TTFT %v:%s", pk.at.Round(time.Millisecond), rq.turn, rq.decision.UncachedTokens, rq.ttft.Round(time.Millisecond), b.String())
				}
			}
		}
	}
}
