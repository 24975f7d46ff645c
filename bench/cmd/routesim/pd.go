package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/kvroute/kvroute/bench/internal/sim"
)

// pdOptions are the flags of the P/D study (-pd).
type pdOptions struct {
	on              bool
	sweep           bool
	seeds           int
	requests        int
	loads           string
	prefill, decode int
	threshold       int64
	maxQueue        int64
	costRule        bool
	stallWeight     float64
	belowWeight     float64
	stallCap        float64
	dynamoThreshold int
	dynamoRatio     float64
}

func addPDFlags(fs *flag.FlagSet, o *pdOptions) {
	def := sim.DefaultPDConfig(1)
	fs.BoolVar(&o.on, "pd", false, "run only the prefill/decode disaggregation study (writes routesim-pd.md and routesim-pd.json)")
	fs.BoolVar(&o.sweep, "pd-sweep", true, "with -pd: also run the sensitivity sweep (pool sizes, the decider's knobs) and append it to the report")
	fs.IntVar(&o.seeds, "pd-seeds", 0, "with -pd: also run the study on traffic seeds 1..N and append each target row's tally over them (0: off)")
	fs.IntVar(&o.requests, "pd-requests", def.Workload.Requests, "with -pd: requests per run")
	fs.StringVar(&o.loads, "pd-loads", "0.5,0.75,1,1.25", "with -pd: comma-separated loads (multiples of the aggregated fleet's measured capacity)")
	fs.IntVar(&o.prefill, "pd-prefill", def.Prefill, "with -pd: prefill engines (aggregated runs prefill + decode engines of role both)")
	fs.IntVar(&o.decode, "pd-decode", def.Decode, "with -pd: decode engines")
	fs.Int64Var(&o.threshold, "pd-threshold", def.Decider.NonCachedTokens, "with -pd: the kvroute decider's nonCachedTokens (split at this many uncached prompt tokens on the decode endpoint; negative: always)")
	fs.Int64Var(&o.maxQueue, "pd-max-prefill-queue", def.Decider.MaxPrefillQueueTokens, "with -pd: the kvroute decider's maxPrefillQueueTokens (0: no prefill-load rule)")
	fs.BoolVar(&o.costRule, "pd-cost-rule", def.Decider.CostRule, "with -pd: the kvroute decider's cost rule (split only when estimated faster than prefilling on the decode engine)")
	fs.Float64Var(&o.stallWeight, "pd-stall-weight", def.Decider.DecodeStallWeight, "with -pd: the cost rule's decodeStallWeight (0: disagg's default; negative: no stall priced)")
	fs.Float64Var(&o.belowWeight, "pd-below-stall-weight", def.Decider.BelowThresholdStallWeight, "with -pd: the cost rule's belowThresholdStallWeight (0: disagg's default; negative: nothing below the threshold splits)")
	fs.Float64Var(&o.stallCap, "pd-stall-cap", def.Decider.DecodeStallCap, "with -pd: the cost rule's decodeStallCap, the most stall it prices in multiples of the prefill's own time (0: disagg's default; negative: no cap)")
	fs.IntVar(&o.dynamoThreshold, "pd-dynamo-isl", def.Dynamo.EffISLThreshold, "with -pd: Dynamo's conditional-disagg eff_isl_threshold")
	fs.Float64Var(&o.dynamoRatio, "pd-dynamo-ratio", def.Dynamo.EffISLRatio, "with -pd: Dynamo's conditional-disagg eff_isl_ratio_threshold")
}

// runPD is -pd: the P/D study, written as routesim-pd.md and
// routesim-pd.json. -seed, -event-delay, -parallel and -blocks (when
// given) apply.
func runPD(o options, base sim.Config, args []string, stdout io.Writer) error {
	loads, err := parseLoads(o.pd.loads)
	if err != nil {
		return err
	}
	c := sim.DefaultPDConfig(1)
	c.Base.Seed, c.Base.EventDelay = base.Seed, base.EventDelay
	if o.blocksSet {
		c.Base.Fleet.NumGPUBlocks = base.Fleet.NumGPUBlocks
	}
	c.Workload.Requests = o.pd.requests
	c.Prefill, c.Decode = o.pd.prefill, o.pd.decode
	c.Decider.NonCachedTokens, c.Decider.MaxPrefillQueueTokens = o.pd.threshold, o.pd.maxQueue
	c.Decider.CostRule, c.Decider.DecodeStallWeight = o.pd.costRule, o.pd.stallWeight
	c.Decider.BelowThresholdStallWeight = o.pd.belowWeight
	c.Decider.DecodeStallCap = o.pd.stallCap
	c.Dynamo.EffISLThreshold, c.Dynamo.EffISLRatio = o.pd.dynamoThreshold, o.pd.dynamoRatio
	st, err := sim.RunPDStudy(c, loads, sim.AllPDPolicies, o.parallel)
	if err != nil {
		return err
	}
	var sweep []sim.PDSweepRow
	if o.pd.sweep {
		if sweep, err = sim.RunPDSweep(st.Config, loads, sim.DefaultPDVariants(st.Config), o.parallel); err != nil {
			return err
		}
	}
	var seeds []uint64
	var seedRows []sim.PDSeedRow
	var reach []sim.PDReach
	for s := 1; s <= o.pd.seeds; s++ {
		seeds = append(seeds, uint64(s))
	}
	if len(seeds) > 0 {
		if seedRows, err = sim.RunPDSeeds(st.Config, seeds, loads, o.parallel, &st); err != nil {
			return err
		}
		reach = sim.PDReachability(st.Config, seedRows)
	}
	command := strings.TrimSpace("go run ./bench/cmd/routesim " + strings.Join(args, " "))
	if err := writeFile(filepath.Join(o.out, "routesim-pd.md"), func(f io.Writer) error {
		if err := sim.WritePDMarkdown(f, st, command); err != nil {
			return err
		}
		if seedRows != nil {
			if err := sim.WritePDSeedsMarkdown(f, seeds, seedRows); err != nil {
				return err
			}
			if err := sim.WritePDReachMarkdown(f, st.Config, reach); err != nil {
				return err
			}
		}
		if sweep == nil {
			return nil
		}
		return sim.WritePDSweepMarkdown(f, loads, sweep)
	}); err != nil {
		return err
	}
	if err := writeFile(filepath.Join(o.out, "routesim-pd.json"), func(f io.Writer) error {
		enc := json.NewEncoder(f)
		enc.SetIndent("", "  ")
		return enc.Encode(map[string]any{"command": command, "study": st, "seeds": seedRows, "reach": reach, "sweep": sweep})
	}); err != nil {
		return err
	}
	met := 0
	for _, t := range st.Targets {
		if t.Met {
			met++
		}
	}
	fmt.Fprintf(stdout, "P/D study: capacity %.1f requests/s, %d/%d target rows met; wrote %s\n", st.Config.Capacity, met, len(st.Targets), filepath.Join(o.out, "routesim-pd.md"))
	return nil
}
