package extproc

import (
	"testing"

	"github.com/kvroute/kvroute"
)

// FuzzConformanceSelection feeds the selection header parser arbitrary
// values (seed corpus in testdata/fuzz/FuzzConformanceSelection): it never
// panics, names only known endpoints, each at most once.
func FuzzConformanceSelection(f *testing.F) {
	for _, s := range []string{"", "10.0.0.7", "10.0.0.7:3000,10.0.0.8", "[fd00::1]:3000,fd00::1", "[", "]:", ":::", ",,,", "10.0.0.7:"} {
		f.Add(s)
	}
	eps := []kvroute.Endpoint{{ID: "10.0.0.7:3000"}, {ID: "10.0.0.7:3002"}, {ID: "[fd00::1]:3000"}, {ID: "not-an-address"}}
	f.Fuzz(func(t *testing.T, header string) {
		sel, _ := conformanceSelection([]string{header}, eps)
		seen := map[string]bool{}
		for _, e := range sel {
			if seen[e.ID] {
				t.Fatalf("%q named %s twice", header, e.ID)
			}
			seen[e.ID] = true
			known := false
			for _, k := range eps {
				known = known || k.ID == e.ID
			}
			if !known {
				t.Fatalf("%q named unknown %s", header, e.ID)
			}
		}
	})
}
