package sim

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"
)

// smallPD is a version of the P/D study that runs in a few seconds under
// -race: 2 prefill + 2 decode engines, 240 requests of shorter prompts, a
// fixed capacity (about what 4 engines serve on this traffic).
func smallPD(load float64) PDConfig {
	c := DefaultPDConfig(load)
	c.Prefill, c.Decode = 2, 2
	c.Base.Fleet.NumGPUBlocks = 2048
	c.Workload.Requests = 240
	c.Workload.SystemPrompts, c.Workload.SystemTokens, c.Workload.DocumentTokens = 4, 2048, 4096
	c.Capacity = 16
	return c
}

// TestPDRunInvariants runs every policy on one small run and checks what
// each must hold: every request served, every looked-up prompt token
// either hit, computed or pulled, the split rate each policy implies, the
// aggregated policy pulling nothing, and the same numbers on a second run.
func TestPDRunInvariants(t *testing.T) {
	c := smallPD(1)
	for _, p := range AllPDPolicies {
		r, err := RunPD(c, p)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		t.Logf("%s: TTFT p50 %v p90 %v, ITL p50 %v, split %.2f, %.0f tokens/s", p, r.TTFTP50, r.TTFTP90, r.ITLP50, r.SplitRate, r.OutputThroughput)
		if r.Requests != c.Workload.Requests || r.Completed != r.Requests {
			t.Errorf("%s: %d requests, %d completed, want %d", p, r.Requests, r.Completed, c.Workload.Requests)
		}
		if got := r.CachedTokens + r.ComputedPromptTokens + r.PulledTokens; got != r.LookedUpTokens {
			t.Errorf("%s: hit %d + computed %d + pulled %d = %d, looked up %d", p, r.CachedTokens, r.ComputedPromptTokens, r.PulledTokens, got, r.LookedUpTokens)
		}
		if !(r.TTFTP50 > 0 && r.TTFTP50 <= r.TTFTP90 && r.ITLP50 > 0 && r.ITLP50 <= r.ITLP90) {
			t.Errorf("%s: percentiles out of order: TTFT %v/%v, ITL %v/%v", p, r.TTFTP50, r.TTFTP90, r.ITLP50, r.ITLP90)
		}
		want := float64(r.Completed*c.Workload.OutputTokens) / r.Makespan.Seconds()
		if r.OutputThroughput <= 0 || r.OutputThroughput != want {
			t.Errorf("%s: output throughput %v, want %v", p, r.OutputThroughput, want)
		}
		switch p {
		case PDAggregated:
			if r.SplitRate != 0 || r.PulledTokens != 0 || r.LookedUpTokens != r.PromptTokens || r.PrefillComputeShare != 0 {
				t.Errorf("aggregated split %v, pulled %d, looked up %d of %d prompt tokens", r.SplitRate, r.PulledTokens, r.LookedUpTokens, r.PromptTokens)
			}
		case PDAlways:
			if r.SplitRate != 1 || r.LookedUpTokens != 2*r.PromptTokens || r.PulledTokens == 0 {
				t.Errorf("always split %v, looked up %d of 2 × %d, pulled %d", r.SplitRate, r.LookedUpTokens, r.PromptTokens, r.PulledTokens)
			}
		case PDDecider, PDDynamo:
			// Documents split (all their tokens uncached), follow-up turns stay.
			if !(r.SplitRate > 0 && r.SplitRate < 1) {
				t.Errorf("%s split %v, want strictly between 0 and 1", p, r.SplitRate)
			}
		}
		again, err := RunPD(c, p)
		if err != nil {
			t.Fatal(err)
		}
		again.Wall = r.Wall
		if again != r {
			t.Errorf("%s not deterministic:\n%+v\n%+v", p, r, again)
		}
	}
}

// TestPDDeciderKnobs checks the decider's knobs move its split rate the
// way they say: no request splits above the longest prompt with the rule
// below the threshold off, some do with it on (the decoders, prefilling
// everything, hand short prompts to idle prefillers), every one below 0
// (always), and the prefill-load rule keeps requests local.
func TestPDDeciderKnobs(t *testing.T) {
	c := smallPD(1)
	c.Decider.NonCachedTokens, c.Decider.BelowThresholdStallWeight = 1<<20, -1
	if r, err := RunPD(c, PDDecider); err != nil || r.SplitRate != 0 {
		t.Errorf("threshold above every prompt, nothing split below it: split %v, %v", r.SplitRate, err)
	}
	c.Decider.BelowThresholdStallWeight = 0 // the default
	if r, err := RunPD(c, PDDecider); err != nil || !(r.SplitRate > 0 && r.SplitRate < 1) {
		t.Errorf("threshold above every prompt, the rule below it at its default: split %v, want some, %v", r.SplitRate, err)
	}
	c.Decider.NonCachedTokens, c.Decider.CostRule = -1, false
	if r, err := RunPD(c, PDDecider); err != nil || r.SplitRate != 1 {
		t.Errorf("negative threshold without the cost rule: split %v, %v", r.SplitRate, err)
	}
	c.Decider.CostRule = true
	if r, err := RunPD(c, PDDecider); err != nil || !(r.SplitRate > 0 && r.SplitRate < 1) {
		t.Errorf("negative threshold with the cost rule: split %v, want some local, %v", r.SplitRate, err)
	}
	c = smallPD(1.5)
	c.Decider.CostRule = false
	base, err := RunPD(c, PDDecider)
	if err != nil {
		t.Fatal(err)
	}
	c.Decider.MaxPrefillQueueTokens = 1
	ruled, err := RunPD(c, PDDecider)
	if err != nil {
		t.Fatal(err)
	}
	if !(ruled.SplitRate < base.SplitRate) {
		t.Errorf("prefill-load rule at 1 token: split %v, without %v", ruled.SplitRate, base.SplitRate)
	}
}

// TestPDStudyReport runs a two-load study and checks its target rows and
// report: one row per other policy per load, each ✓ exactly when the
// decider's p90 is at or below the other's.
func TestPDStudyReport(t *testing.T) {
	c := smallPD(1)
	loads := []float64{0.25, 1}
	st, err := RunPDStudy(c, loads, AllPDPolicies, 4)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Results) != len(loads)*len(AllPDPolicies) {
		t.Fatalf("%d results", len(st.Results))
	}
	if len(st.Targets) != len(AllPDPolicies)-1 { // 0.25 is below the target's range
		t.Fatalf("%d target rows, want %d", len(st.Targets), len(AllPDPolicies)-1)
	}
	d, _ := st.Result(PDDecider, 1)
	for i, p := range []PDPolicy{PDAggregated, PDAlways, PDDynamo} {
		o, _ := st.Result(p, 1)
		if tc := st.Targets[i]; tc.Met != (d.TTFTP90 <= o.TTFTP90) || !strings.Contains(tc.Target, string(p)) {
			t.Errorf("row %d: %+v; decider %v, %s %v", i, tc, d.TTFTP90, p, o.TTFTP90)
		}
	}
	var b bytes.Buffer
	if err := WritePDMarkdown(&b, st, "go test"); err != nil {
		t.Fatal(err)
	}
	md := b.String()
	for _, want := range []string{"Generated by `go test`", "### 1× capacity", "| kvroute-decider |", "## Target", "rows met."} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q", want)
		}
	}
}

// TestPDCapacity measures the small fleet's capacity: positive, and above
// the no-hit prefill capacity (the chats' shared prefixes hit).
func TestPDCapacity(t *testing.T) {
	c := smallPD(1)
	c.Capacity = 0
	cp, err := MeasurePDCapacity(c)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("capacity %.1f requests/s", cp)
	if !(cp > 0) {
		t.Fatalf("capacity %v", cp)
	}
}

// TestPDValidate rejects bad configurations with ErrInvalidConfig.
func TestPDValidate(t *testing.T) {
	for name, mut := range map[string]func(*PDConfig){
		"no decode":      func(c *PDConfig) { c.Decode = 0 },
		"no capacity":    func(c *PDConfig) { c.Capacity = 0 },
		"fraction":       func(c *PDConfig) { c.Workload.DocumentFraction = 1.5 },
		"bandwidth":      func(c *PDConfig) { c.Transfer.BandwidthGBps = 0 },
		"too long":       func(c *PDConfig) { c.Base.Fleet.NumGPUBlocks = 8 },
		"negative think": func(c *PDConfig) { c.Workload.ThinkTime = -time.Second },
	} {
		c := smallPD(1)
		mut(&c)
		if _, err := RunPD(c, PDDecider); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := RunPD(smallPD(1), "nope"); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("unknown policy: %v", err)
	}
}

// TestKVTransferTime checks the transfer model's constants: 128 KiB per
// token at 25 GB/s is 5.24 µs per token, plus 1 ms per transfer.
func TestKVTransferTime(t *testing.T) {
	x := DefaultKVTransfer()
	if got, want := x.time(10_000), time.Millisecond+52428800*time.Nanosecond; got != want {
		t.Errorf("10,000 tokens: %v, want %v", got, want)
	}
}

// TestPDSweep runs two variants on the small study: the decider's p90 under
// the default variant equals the plain run's, the aggregated run is shared,
// and the tally counts every comparison.
func TestPDSweep(t *testing.T) {
	c := smallPD(1)
	vs := []PDVariant{{Prefill: 2, Decode: 2, NonCachedTokens: 1000}, {Prefill: 3, Decode: 1, NonCachedTokens: 1000}}
	rows, err := RunPDSweep(c, []float64{1}, vs, 4)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 {
		t.Fatalf("%d rows", len(rows))
	}
	d, err := RunPD(c, PDDecider)
	if err != nil {
		t.Fatal(err)
	}
	if rows[0].DeciderP90[0] != d.TTFTP90 {
		t.Errorf("sweep's decider p90 %v, plain run's %v", rows[0].DeciderP90[0], d.TTFTP90)
	}
	for _, r := range rows {
		if r.Rows != 3 || r.Met+len(r.Missed) != r.Rows {
			t.Errorf("%s: %d met + %d missed of %d rows", r.Variant, r.Met, len(r.Missed), r.Rows)
		}
	}
	// Six pool splits of 8 engines, two of them again without the stall's
	// cap, and eight knob settings on the stated pools.
	if got := len(DefaultPDVariants(DefaultPDConfig(1))); got != 16 {
		t.Errorf("%d default variants, want 16", got)
	}
}

// TestPDDeciderConfig: the decider the study runs is package disagg's with
// the fleet's own throughputs: an engine's prefill compute and the KV
// link's tokens per second and latency.
func TestPDDeciderConfig(t *testing.T) {
	c := DefaultPDConfig(1)
	d := c.PDDecider()
	if !d.CostRule || d.NonCachedTokens != 1000 || d.PrefillTokensPerSecond != c.Base.Fleet.PrefillTokensPerSecond ||
		d.TransferLatency != c.Transfer.Latency || d.TransferTokensPerSecond != 25e9/131072 {
		t.Errorf("decider %+v", d)
	}
	if err := d.Validate(); err != nil {
		t.Error(err)
	}
	c.Transfer.Latency = 0
	if got := c.PDDecider().TransferLatency; got >= 0 {
		t.Errorf("no transfer latency: %v, want negative (none)", got)
	}
}
