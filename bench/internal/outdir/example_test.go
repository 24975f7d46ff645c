package outdir_test

import (
	"fmt"
	"path/filepath"

	"github.com/kvroute/kvroute/bench/internal/outdir"
)

// Without a -out flag, a benchmark command writes under the module root.
func ExampleResolve() {
	dir, err := outdir.Resolve("", "out/routesim")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(filepath.ToSlash(filepath.Base(filepath.Dir(dir))) + "/" + filepath.Base(dir))
	given, _ := outdir.Resolve("/tmp/results", "out/routesim")
	fmt.Println(given)
	// Output:
	// out/routesim
	// /tmp/results
}
