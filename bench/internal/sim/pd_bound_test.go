package sim

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/kvroute/kvroute/simengine"
)

// TestPDSplitFloorHolds runs the split policies on a small run and checks
// that no split document's TTFT is below PDSplitFloor, and that the floor
// is near what an unqueued document takes (it is the bound's premise).
func TestPDSplitFloorHolds(t *testing.T) {
	c := smallPD(0.5)
	floor := PDSplitFloor(c)
	for _, p := range []PDPolicy{PDAlways, PDDecider} {
		r, err := runPD(c, p)
		if err != nil {
			t.Fatal(err)
		}
		least := time.Duration(-1)
		for _, rq := range r.reqs {
			if rq.session >= 0 || rq.prefill < 0 {
				continue
			}
			if d := rq.first.Sub(rq.arrived); least < 0 || d < least {
				least = d
			}
		}
		if least < floor || least > floor+20*time.Millisecond {
			t.Errorf("%s: fastest split document %v, floor %v", p, least, floor)
		}
	}
}

// bruteMaxLocal tries every assignment of documents to engines (or none),
// each engine serving its documents first come first served.
func bruteMaxLocal(c PDConfig, arr []time.Duration, t time.Duration) int {
	f := c.Base.Fleet
	work := computeTime(c.Workload.DocumentTokens, f.PrefillTokensPerSecond)
	best := 0
	var rec func(i, n int, busy []time.Duration)
	rec = func(i, n int, busy []time.Duration) {
		if i == len(arr) {
			best = max(best, n)
			return
		}
		rec(i+1, n, busy)
		for e := range busy {
			start := max(busy[e], arr[i])
			if start+work+f.DecodeStep <= arr[i]+t {
				b := slices.Clone(busy)
				b[e] = start + work
				rec(i+1, n+1, b)
			}
		}
	}
	rec(0, 0, make([]time.Duration, c.Decode))
	return best
}

// TestPDMaxLocalDocumentsExact checks the search against every assignment
// on small random arrivals, for 1 to 3 decode engines and windows from
// the bare prefill to twice it.
func TestPDMaxLocalDocumentsExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 9))
	c := DefaultPDConfig(1)
	for trial := range 300 {
		c.Decode = 1 + trial%3
		var arr []time.Duration
		at := time.Duration(0)
		for range 2 + rng.IntN(8) {
			at += time.Duration(rng.ExpFloat64() * float64(400*time.Millisecond))
			arr = append(arr, at)
		}
		win := time.Duration((0.8 + 1.2*rng.Float64()) * float64(time.Second))
		if got, want := PDMaxLocalDocuments(c, arr, win), bruteMaxLocal(c, arr, win); got != want {
			t.Fatalf("trial %d: %d engines, arrivals %v, window %v: %d, every assignment gives %d", trial, c.Decode, arr, win, got, want)
		}
	}
	if n := PDMaxLocalDocuments(c, []time.Duration{0, 0, 0}, PDSplitFloor(c)); n != c.Decode {
		t.Errorf("three documents at once: %d on %d engines", n, c.Decode)
	}
	if n := PDMaxLocalDocuments(c, []time.Duration{0}, 800*time.Millisecond); n != 0 {
		t.Errorf("a window shorter than the prefill: %d", n)
	}
}

// TestPDMaxLocalDocumentsBoundsRuns checks the bound against real runs
// that prefill documents on the decoders (the threshold above every
// prompt): no run has more local documents within the window than the
// bound allows, whatever the window.
func TestPDMaxLocalDocumentsBoundsRuns(t *testing.T) {
	c := smallPD(0.5)
	c.Decider.NonCachedTokens, c.Decider.BelowThresholdStallWeight = 1<<20, -1
	r, err := runPD(c, PDDecider)
	if err != nil {
		t.Fatal(err)
	}
	var arr []time.Duration
	var local []time.Duration
	for _, rq := range r.reqs {
		if rq.session < 0 {
			arr = append(arr, rq.arrived.Sub(simengine.DefaultStart))
			if rq.prefill < 0 {
				local = append(local, rq.first.Sub(rq.arrived))
			}
		}
	}
	slices.Sort(arr)
	if len(local) == 0 {
		t.Fatal("no document prefilled on a decoder")
	}
	for _, win := range []time.Duration{450 * time.Millisecond, 600 * time.Millisecond, time.Second, 2 * time.Second} {
		within := 0
		for _, d := range local {
			if d <= win {
				within++
			}
		}
		bound := PDMaxLocalDocuments(c, arr, win)
		t.Logf("window %v: %d of %d local documents within it, bound %d", win, within, len(local), bound)
		if within > bound {
			t.Errorf("window %v: %d local documents within it, bound %d", win, within, bound)
		}
	}
}

// TestPDReachability checks the bound's row logic: only cells below the
// split floor are bounded, and a p90 no document can reach is unreachable.
func TestPDReachability(t *testing.T) {
	c := smallPD(1)
	floor := PDSplitFloor(c)
	rows := []PDSeedRow{{Load: 1, Other: PDAggregated, PerSeed: []PDSeedCell{
		{Seed: 1, OtherP90: floor + time.Millisecond},
		{Seed: 1, OtherP90: floor - time.Millisecond},
		{Seed: 1, OtherP90: time.Millisecond},
	}}}
	rs := PDReachability(c, rows)
	if len(rs) != 2 {
		t.Fatalf("%d bounded cells, want 2: %+v", len(rs), rs)
	}
	tiny := rs[1]
	if tiny.MaxLocal != 0 || !tiny.Unreachable || tiny.Need < 1 || tiny.Documents < tiny.Need {
		t.Errorf("a 1 ms p90: %+v", tiny)
	}
	if rs[0].MaxLocal < rs[1].MaxLocal || rs[0].MaxLocal > rs[0].Documents {
		t.Errorf("just below the floor: %+v", rs[0])
	}
}
