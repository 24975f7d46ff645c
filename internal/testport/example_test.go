package testport_test

import (
	"fmt"

	"github.com/kvroute/kvroute/internal/testport"
)

// A test that restarts a publisher on the same address takes the address
// from testport rather than from a bind to port 0: with t at hand,
//
//	addr := "tcp://" + testport.Addr(t)
//
// gives both lifetimes the address. Find is the form without a testing.TB,
// here for two consecutive ports (a data-parallel engine's two ranks).
func Example() {
	port, err := testport.Find(testport.Options{Offsets: []int{0, 1}})
	if err != nil {
		fmt.Println(err)
		return
	}
	low, _ := testport.EphemeralRange()
	fmt.Println("below the ephemeral range:", port >= testport.Min && port+1 < low)
	// Output: below the ephemeral range: true
}
