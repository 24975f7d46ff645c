package e2e_test

import (
	"fmt"
	"strings"

	"github.com/kvroute/kvroute/e2e"
)

// The demo reads the engines' and the gateway's /metrics with ParseMetrics;
// the engine's hit rate is the ratio of two counters.
func ExampleParseMetrics() {
	m, err := e2e.ParseMetrics(strings.NewReader(`
vllm:prefix_cache_hits_total{engine="0",model_name="m"} 17856
vllm:prefix_cache_queries_total{engine="0",model_name="m"} 20220
`))
	if err != nil {
		panic(err)
	}
	fmt.Printf("hit rate %.1f%%\n", 100*m.Sum("vllm:prefix_cache_hits_total")/m.Sum("vllm:prefix_cache_queries_total"))
	// Output: hit rate 88.3%
}
