package main

import (
	"flag"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/kvroute/kvroute/bench/internal/sim"
)

// loraOptions are the flags of the LoRA adapter-affinity study.
type loraOptions struct {
	on       bool
	requests int
	rates    string
	zipfs    string
}

func addLoRAFlags(fs *flag.FlagSet, o *loraOptions) {
	def := sim.DefaultLoRAConfig(0)
	fs.BoolVar(&o.on, "lora", false, "run only the LoRA adapter-affinity study: 8 adapters over 4 engines with 2 slots each, with and without the adapter scorer (writes lora-affinity.md)")
	fs.IntVar(&o.requests, "lora-requests", def.Requests, "with -lora: requests per run")
	fs.StringVar(&o.rates, "lora-rates", "10,20,30,40", "with -lora: comma-separated arrival rates (requests per second over the fleet)")
	fs.StringVar(&o.zipfs, "lora-zipf", "0,1.5", "with -lora: comma-separated adapter popularity skews (0 uniform, >1 a Zipf exponent)")
}

func runLoRA(o options, args []string, stdout io.Writer) error {
	rates, err := parseLoads(o.lora.rates)
	if err != nil {
		return err
	}
	var zipfs []float64
	for _, f := range splitList(o.lora.zipfs) {
		v, err := strconv.ParseFloat(f, 64)
		if err != nil || (v != 0 && !(v > 1)) || math.IsInf(v, 0) {
			return fmt.Errorf("-lora-zipf: bad skew %q: want 0 (uniform) or a finite Zipf exponent above 1", f)
		}
		zipfs = append(zipfs, v)
	}
	base := sim.DefaultLoRAConfig(0)
	base.Requests, base.Seed = o.lora.requests, o.seed
	st, err := sim.RunLoRAStudy(base, rates, zipfs)
	if err != nil {
		return err
	}
	command := strings.TrimSpace("go run ./bench/cmd/routesim " + strings.Join(args, " "))
	path := filepath.Join(o.out, "lora-affinity.md")
	if err := writeFile(path, func(f io.Writer) error { return st.WriteMarkdown(f, command) }); err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "wrote %s (%d runs)\n", path, len(st.Rows))
	return err
}
