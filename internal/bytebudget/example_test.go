package bytebudget_test

import (
	"fmt"

	"github.com/kvroute/kvroute/internal/bytebudget"
)

// Two bodies fit in a budget of 100 bytes only while together they hold
// no more than that.
func ExampleBudget() {
	b := bytebudget.Budget{Limit: 100}
	fmt.Println(b.Acquire(60), b.Acquire(60), b.InUse())
	b.Release(60)
	fmt.Println(b.Acquire(60), b.InUse())
	// Output:
	// true false 60
	// true 60
}
