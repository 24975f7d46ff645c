package disagg_test

import (
	"fmt"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/disagg"
)

// A Profile is the Router's profile step; endpoints carry their roles.
func Example() {
	p, err := disagg.New(disagg.Config{NonCachedTokens: 512}, disagg.Options{})
	if err != nil {
		panic(err)
	}
	defer p.Close()
	opts := kvroute.Options{Profile: p}
	eps := []kvroute.Endpoint{
		{ID: "10.0.0.1:8000", Role: disagg.RolePrefill},
		{ID: "10.0.0.2:8000", Role: disagg.RoleDecode},
	}
	fmt.Println(opts.Profile != nil, disagg.Prefills(eps[0]), disagg.Decodes(eps[0]), disagg.Decodes(eps[1]))
	fmt.Println(p.Config().NonCachedTokens, disagg.HeaderPrefiller)
	// Output:
	// true true false true
	// 512 x-prefiller-host-port
}
