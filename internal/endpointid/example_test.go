package endpointid_test

import (
	"fmt"
	"strings"

	"github.com/kvroute/kvroute/internal/endpointid"
)

// An engine's ip:port passes; a host name longer than DNS allows does not.
func Example() {
	fmt.Println(endpointid.Check("10.0.0.7:8000"))
	fmt.Println(endpointid.Check(strings.Repeat("a", 300) + ":8000"))
	// Output:
	// <nil>
	// endpoint id "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"... is 305 bytes, over 259
}
