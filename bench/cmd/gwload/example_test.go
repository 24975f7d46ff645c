package main

import (
	"fmt"
	"io"
)

// gwload's flags choose the targets and concurrencies of the cells it
// measures; a target it does not know is refused before any process
// starts.
func Example() {
	o, err := parseFlags([]string{"-targets", "precise, round-robin", "-concurrency", "16,64", "-rounds", "3"}, io.Discard)
	fmt.Println(o.targets, o.conc, o.rounds, o.window, err)
	_, err = parseFlags([]string{"-targets", "precise,nginx"}, io.Discard)
	fmt.Println(err)
	// Output:
	// [precise round-robin] [16 64] 3 5s <nil>
	// --targets: unknown target "nginx"
}
