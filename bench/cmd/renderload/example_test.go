package main

import (
	"fmt"
	"os"
)

// renderload's flags, as -help prints them, and the one line a bad flag
// value gets before anything starts. (A run's figures are not shown: they
// are wall-clock rates of the machine it runs on.)
func Example() {
	fmt.Println(run([]string{"-help"}, os.Stdout))
	fmt.Println(run([]string{"-loads", "0.5,x"}, os.Stdout))
	// Output:
	// Usage of renderload:
	//   -duration duration
	//     	how long requests arrive, per scenario and load (default 15s)
	//   -loads string
	//     	offered loads, as multiples of the renderers' capacity (default "0.5,2")
	//   -out string
	//     	output directory (default out/renderload under the module root)
	//   -render-time duration
	//     	a worker's time per prompt (a 49k-token prompt on one vLLM renderer core) (default 100ms)
	//   -renderers int
	//     	simulated engines, each rendering (default 2)
	//   -words int
	//     	words per prompt (about one token each) (default 8192)
	//   -workers int
	//     	render workers per engine (default 1)
	// flag: help requested
	// -loads: "x" is not a positive number
}
