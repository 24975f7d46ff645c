package labelselector_test

import (
	"fmt"

	"github.com/kvroute/kvroute/internal/labelselector"
)

// A label selector decides from an endpoint's labels whether it is picked.
func ExampleParse() {
	sel, err := labelselector.Parse("role=decode, zone in (a,b), !draining")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(sel.Matches(map[string]string{"role": "decode", "zone": "a"}))
	fmt.Println(sel.Matches(map[string]string{"role": "decode", "zone": "a", "draining": "true"}))
	fmt.Println(sel.Matches(map[string]string{"role": "prefill", "zone": "b"}))

	_, err = labelselector.Parse("zone in (a,")
	fmt.Println(err)
	// Output:
	// true
	// false
	// false
	// invalid label selector "zone in (a," at offset 11: expected a value or ',' in the set
}
