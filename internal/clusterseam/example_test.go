package clusterseam_test

import (
	"fmt"

	_ "github.com/kvroute/kvroute" // fills AttachManual, and through package cluster NewManual

	"github.com/kvroute/kvroute/internal/clusterseam"
)

// The seam is filled in by the packages on either side of it once they are
// linked in; the routing simulation then attaches each Router to its
// virtual-time store with AttachManual (bench/internal/sim/sharedstate.go).
func Example() {
	fmt.Println(clusterseam.NewManual != nil, clusterseam.AttachManual != nil)
	// Output: true true
}
