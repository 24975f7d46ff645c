package approx_test

import (
	"fmt"
	"time"

	"github.com/kvroute/kvroute/approx"
	"github.com/kvroute/kvroute/kvindex"
)

// An engine without KV events: the router records what it sent there and
// matches the next request with the same prefix against it.
func Example() {
	ix, err := approx.New(approx.Config{
		Enabled: true,
		// 20,000 GPU blocks and 60,000 offloaded to CPU, 16 tokens each.
		Endpoints: map[string]approx.Capacity{"vllm-0": {GPUBlocks: 20000, CPUBlocks: 60000, BlockSize: 16}},
	}, approx.Options{})
	if err != nil {
		panic(err)
	}
	_ = ix.Bind(approx.Binding{Live: func(string) bool { return false }, BlockSize: 64}) // events off
	ix.SetEndpoints([]string{"vllm-0", "vllm-1"})

	prompt := []kvindex.Key{11, 12, 13, 14} // a prompt's chained block keys
	ix.Record("vllm-0", prompt)             // the router sent it to vllm-0

	next := []kvindex.Key{11, 12, 99} // same first two blocks
	fmt.Println("vllm-0 holds", ix.Match("vllm-0", next), "blocks")
	fmt.Println("vllm-1 holds", ix.Match("vllm-1", next), "blocks")
	fmt.Println("mode:", ix.Current().Mode("vllm-0"))
	for _, e := range ix.Endpoints() {
		fmt.Println(e.ID, e.Mode, e.Entries, "entries, capacity", e.Capacity, "blocks")
	}
	// Output:
	// vllm-0 holds 2 blocks
	// vllm-1 holds 0 blocks
	// mode: approximate
	// vllm-0 approximate 4 entries, capacity 20000 blocks
	// vllm-1 approximate 0 entries, capacity 7812 blocks
}

// engineReports is a CapacitySource: what each engine's own metrics said
// (in a gateway, vLLM's vllm:cache_config_info as package enginemetrics
// scraped it).
type engineReports map[string]approx.EngineCapacity

func (r engineReports) EngineCapacity(id string) approx.EngineCapacity { return r[id] }

// Each endpoint's index is sized to what its engine reports; an engine that
// offloads to CPU without saying how much takes the configured CPU tier,
// and one whose metrics cannot be read falls back to the configured
// capacity, with the reason.
func ExampleCapacitySource() {
	now := time.Now()
	src := engineReports{
		"vllm-0": {Capacity: approx.Capacity{GPUBlocks: 8000, BlockSize: 16}, Read: now},
		"vllm-1": {Capacity: approx.Capacity{GPUBlocks: 8000, BlockSize: 16}, Read: now, Offloading: true},
		"vllm-2": {Failure: "connection"},
	}
	ix, err := approx.New(approx.Config{
		Enabled:  true,
		Capacity: approx.Capacity{GPUBlocks: 4000, CPUBlocks: 24000, BlockSize: 16},
	}, approx.Options{Capacities: src})
	if err != nil {
		panic(err)
	}
	_ = ix.Bind(approx.Binding{BlockSize: 64})
	ix.SetEndpoints([]string{"vllm-0", "vllm-1", "vllm-2"})
	for _, e := range ix.Endpoints() {
		fmt.Printf("%s: %d blocks from %s %q\n", e.ID, e.Capacity, e.CapacitySource, e.CapacityFallback)
	}
	// Output:
	// vllm-0: 2000 blocks from engine ""
	// vllm-1: 8000 blocks from engine+config_cpu ""
	// vllm-2: 7000 blocks from default "metrics_unavailable"
}
