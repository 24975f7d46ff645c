package leakcheck_test

import (
	"fmt"
	"sync"

	"github.com/kvroute/kvroute/internal/leakcheck"
)

// printT is a stand-in for *testing.T that prints what Check reports.
type printT struct{}

func (printT) Helper() {}
func (printT) Errorf(format string, args ...any) {
	fmt.Println("leak reported")
}

// A component that stops its goroutine on Close passes the check.
func Example() {
	done := leakcheck.Check(printT{})
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); <-stop }() // the component's background loop
	close(stop)                             // Close
	wg.Wait()
	done()
	fmt.Println("checked")
	// Output: checked
}
