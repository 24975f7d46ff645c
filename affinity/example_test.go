package affinity_test

import (
	"fmt"
	"time"

	"github.com/kvroute/kvroute/affinity"
)

// A router keeps one Candidate per endpoint and a reusable index slice, and
// asks the filter once per request which endpoints the load scorer may choose
// from.
func ExampleFilter_Apply() {
	f, err := affinity.New(affinity.DefaultConfig(), affinity.Options{})
	if err != nil {
		panic(err)
	}
	endpoints := []string{"10.0.0.1:8000", "10.0.0.2:8000", "10.0.0.3:8000"}
	cands := []affinity.Candidate{
		{Score: 30, InFlightTokens: 120_000, LoadKnown: true}, // holds 30 of the prompt's 32 blocks
		{Score: 4, InFlightTokens: 0, LoadKnown: true},        // holds the system prompt only
		{Score: 0, InFlightTokens: 8_000, LoadKnown: true},
	}
	pass := make([]int, 0, len(cands))

	pass, outcome := f.Apply(pass, 32, cands)
	fmt.Println(outcome, names(endpoints, pass))

	// The warm endpoint falls behind: 410,000 − 0 tokens is more than
	// 18 s × 15,928 tokens/s = 286,704 tokens of extra prefill.
	cands[0].InFlightTokens = 410_000
	pass, outcome = f.Apply(pass, 32, cands)
	fmt.Println(outcome, names(endpoints, pass))
	// Output:
	// sticky [10.0.0.1:8000]
	// load_override [10.0.0.1:8000 10.0.0.2:8000 10.0.0.3:8000]
}

func names(endpoints []string, idx []int) []string {
	out := make([]string, len(idx))
	for i, j := range idx {
		out[i] = endpoints[j]
	}
	return out
}

// Calibration: 20 sequential 8,192-token random prompts took about 514 ms to
// their first token.
func ExamplePeakPrefillThroughput() {
	var ttfts []time.Duration
	for i := range 20 {
		ttfts = append(ttfts, 504800*time.Microsecond+time.Duration(i)*time.Millisecond)
	}
	peak, err := affinity.PeakPrefillThroughput(8192, ttfts)
	if err != nil {
		panic(err)
	}
	fmt.Printf("PEAK_PREFILL_THROUGHPUT=%.0f\n", peak)
	// Output: PEAK_PREFILL_THROUGHPUT=15928
}
