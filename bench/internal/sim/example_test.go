package sim_test

import (
	"fmt"

	"github.com/kvroute/kvroute/bench/internal/sim"
)

// Run the small shared-prefix configuration through kvroute and round-robin
// and compare the engines' prefix-cache hit rates.
func ExampleRun() {
	cfg := sim.Quick(0.75)
	precise, err := sim.Run(cfg, sim.KVRoute)
	if err != nil {
		panic(err)
	}
	rr, err := sim.Run(cfg, sim.RoundRobin)
	if err != nil {
		panic(err)
	}
	fmt.Println("requests:", precise.Requests)
	fmt.Println("kvroute hits more than round-robin:", precise.HitRate > rr.HitRate)
	fmt.Println("hit rate within the oracle bound:", precise.HitRate <= precise.BoundHitRate)
	// Output:
	// requests: 400
	// kvroute hits more than round-robin: true
	// hit rate within the oracle bound: true
}
