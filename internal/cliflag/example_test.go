package cliflag_test

import (
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/kvroute/kvroute/internal/cliflag"
)

// A command parses its flags with Parse and ends with Report's status: a
// duration given without a unit comes back as one line that says to add
// one, printed once with the command's name in front.
func Example() {
	fs := flag.NewFlagSet("kvroute-demo", flag.ContinueOnError)
	timeout := fs.Duration("timeout", 30*time.Second, "how long to wait for an engine")

	err := cliflag.Parse(fs, []string{"-timeout", "30"}, os.Stdout)
	code := cliflag.Report(os.Stdout, "kvroute-demo", err)
	fmt.Println("exit status", code)

	err = cliflag.Parse(fs, []string{"-timeout", "2s"}, os.Stdout)
	fmt.Println(*timeout, "exit status", cliflag.Report(os.Stdout, "kvroute-demo", err))
	// Output:
	// kvroute-demo: -timeout "30": a duration needs a unit, e.g. 30s (units: ns, us, ms, s, m, h)
	// exit status 1
	// 2s exit status 0
}
