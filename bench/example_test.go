package bench_test

import (
	"fmt"

	"github.com/kvroute/kvroute/bench"
	"github.com/kvroute/kvroute/kvindex"
)

// Build the kind of index the benchmarks match against: background blocks
// plus a prompt held as a staircase of prefixes, whose Match answer is known.
func ExampleStaircase() {
	ix, err := kvindex.New(kvindex.Config{SweepInterval: -1}, kvindex.Options{})
	if err != nil {
		panic(err)
	}
	defer ix.Close()
	eps := bench.EndpointIDs(4)
	if _, err := bench.Background(ix, eps, 4096, 64, 1); err != nil {
		panic(err)
	}
	prompt := bench.Tokens(42, 2048) // 32 blocks of 64 tokens
	steps := bench.Steps(len(eps), 32)
	if err := bench.Staircase(ix, eps, prompt, steps, 1<<50); err != nil {
		panic(err)
	}
	keys := kvindex.Keys(nil, prompt, ix.BlockSize(), &kvindex.KeyParams{Model: bench.Model})
	var out kvindex.MatchResult
	ix.Match(keys, eps, &out)
	for _, e := range out.Endpoints() {
		fmt.Printf("%s holds %d of %d blocks\n", e.Endpoint, e.Blocks, out.Total)
	}
	fmt.Println("memberships:", ix.Stats().Memberships)
	// Output:
	// 10.0.0.0:8000 holds 1 of 32 blocks
	// 10.0.0.1:8000 holds 11 of 32 blocks
	// 10.0.0.2:8000 holds 21 of 32 blocks
	// 10.0.0.3:8000 holds 32 of 32 blocks
	// memberships: 4161
}
