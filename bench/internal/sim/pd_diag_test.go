package sim

import (
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestPDWhereTheTailIs is a diagnostic, run on demand
// (KVROUTE_SIM_PD_DIAG=<seed>,<load>, e.g. 3,1.25): it runs the P/D study's
// aggregated fleet and kvroute's decider on that traffic seed and load (the
// capacity measured on seed 1, as the study does) and logs, per policy,
// each request class's TTFT (documents and chat turns, split or prefilled
// on their decode engine) with how many of its requests lie above the
// run's p90, and each engine's looked-up, hit, computed and pulled prompt
// tokens: where a p90 row is lost.
func TestPDWhereTheTailIs(t *testing.T) {
	arg := os.Getenv("KVROUTE_SIM_PD_DIAG")
	if arg == "" {
		t.Skip("diagnostic: set KVROUTE_SIM_PD_DIAG to <seed>,<load>")
	}
	seedStr, loadStr, _ := strings.Cut(arg, ",")
	seed, err := strconv.ParseUint(seedStr, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	load, err := strconv.ParseFloat(loadStr, 64)
	if err != nil {
		t.Fatal(err)
	}
	capacity, err := MeasurePDCapacity(DefaultPDConfig(1))
	if err != nil {
		t.Fatal(err)
	}
	c := DefaultPDConfig(load)
	c.Base.Seed, c.Capacity = seed, capacity
	t.Logf("seed %d, load %.2f of %.1f requests/s", seed, load, capacity)
	for _, p := range []PDPolicy{PDAggregated, PDDecider} {
		r, err := runPD(c, p)
		if err != nil {
			t.Fatal(err)
		}
		classes := map[string][]time.Duration{}
		var all []time.Duration
		for _, rq := range r.reqs {
			k := "chat"
			if rq.session < 0 {
				k = "document"
			}
			if rq.prefill >= 0 {
				k += " split"
			} else {
				k += " local"
			}
			d := rq.first.Sub(rq.arrived)
			classes[k] = append(classes[k], d)
			all = append(all, d)
		}
		slices.Sort(all)
		p90 := all[(len(all)*9+9)/10-1]
		res := r.result()
		t.Logf("%s: TTFT p90 %v, makespan %v (first arrival to last completion)", p, p90, res.Makespan.Round(time.Second))
		for _, k := range []string{"document split", "document local", "chat split", "chat local"} {
			v := classes[k]
			if len(v) == 0 {
				continue
			}
			slices.Sort(v)
			above := len(v) - func() int { i, _ := slices.BinarySearch(v, p90+1); return i }()
			t.Logf("  %-14s %4d requests, TTFT p50 %v, p90 %v, %d above the run's p90", k, len(v), v[len(v)/2], v[(len(v)*9+9)/10-1], above)
		}
		for i, e := range r.engines {
			s := e.stats
			t.Logf("  engine %d (%s): looked up %d, hit %d, computed %d, pulled %d prompt tokens; generated %d",
				i, r.roles[i], s.queries, s.hits, s.computed, s.pulled, s.generated)
		}
	}
}
