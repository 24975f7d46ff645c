package approx_test

import (
	"fmt"

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
