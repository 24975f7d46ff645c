package main

import (
	"fmt"
	"io"
)

// The demo's flags pick the run: --fast shortens the burst and the load
// comparison, and the prefill/decode step runs alone, so it is refused
// beside the active-active demo.
func Example() {
	o, err := parseFlags([]string{"--fast", "--engines", "3"}, io.Discard)
	fmt.Println(o.Fast, o.Engines, replicas, pd, err)
	_, err = parseFlags([]string{"--pd", "--replicas", "2"}, io.Discard)
	fmt.Println(err)
	// Output:
	// true 3 1 false <nil>
	// --pd runs alone: not with --replicas 2 or --hold (it stops each policy's engines before the next starts)
}
