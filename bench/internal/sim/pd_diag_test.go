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
// tokens: where a p90 row is lost. For the split documents it also logs
// the median time of each stage (arrival to the prefiller's token, to the
// end of the pull, to the decoder's first token) and, of those above the
// aggregated run's p90, how many waited for a prefill engine (their
// prefiller's token more than 10 ms after the fastest one's).
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
	var aggP90 time.Duration
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
		if p == PDAggregated {
			aggP90 = p90
		}
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
		logSplitStages(t, r.reqs, aggP90)
		for i, e := range r.engines {
			s := e.stats
			t.Logf("  engine %d (%s): looked up %d, hit %d, computed %d, pulled %d prompt tokens; generated %d",
				i, r.roles[i], s.queries, s.hits, s.computed, s.pulled, s.generated)
		}
	}
}

// logSplitStages logs the stages of the split documents' TTFTs and, of
// those above ref, how many waited for a prefill engine.
func logSplitStages(t *testing.T, reqs []*pdReq, ref time.Duration) {
	var pre, pull, first []time.Duration
	var docs []*pdReq
	for _, rq := range reqs {
		if rq.session >= 0 || rq.prefill < 0 {
			continue
		}
		docs = append(docs, rq)
		pre = append(pre, rq.prefilled.Sub(rq.arrived))
		pull = append(pull, rq.pulled.Sub(rq.prefilled))
		first = append(first, rq.first.Sub(rq.pulled))
	}
	if len(docs) == 0 {
		return
	}
	fastest := slices.Min(pre)
	above, waited := 0, 0
	for _, rq := range docs {
		if rq.first.Sub(rq.arrived) > ref {
			above++
			if rq.prefilled.Sub(rq.arrived) > fastest+10*time.Millisecond {
				waited++
			}
		}
	}
	med := func(v []time.Duration) time.Duration { slices.Sort(v); return v[len(v)/2] }
	t.Logf("  split documents: median %v to the prefiller's token (fastest %v), %v more to the end of the pull, %v more to the first token; %d above aggregated's p90 %v, %d of them waited for a prefill engine",
		med(pre).Round(time.Millisecond), fastest.Round(time.Millisecond), med(pull).Round(time.Millisecond), med(first).Round(time.Millisecond), above, ref, waited)
}
