package recent_test

import (
	"fmt"

	"github.com/kvroute/kvroute/internal/recent"
)

// A Ring lists what was added, newest first, and forgets all but the
// latest recent.Size records.
func ExampleRing() {
	var r recent.Ring[int]
	for i := range recent.Size + 2 {
		r.Add(i)
	}
	l := r.List()
	fmt.Println(len(l), l[0], l[len(l)-1])
	// Output: 16 17 2
}
