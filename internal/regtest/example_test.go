package regtest_test

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvroute/kvroute/internal/regtest"
)

// printT is a stand-in for *testing.T that prints what a check reports.
type printT struct{}

func (printT) Helper()                           {}
func (printT) Errorf(format string, args ...any) { fmt.Printf(format+"\n", args...) }
func (printT) FailNow()                          {}

// component registers one counter and unregisters it on Close, as kvroute's
// components do.
type component struct {
	reg    prometheus.Registerer
	served prometheus.Counter
}

func newComponent(reg prometheus.Registerer) (*component, error) {
	c := &component{reg: reg, served: prometheus.NewCounter(prometheus.CounterOpts{
		Name: "example_requests_served_total", Help: "Requests served."})}
	return c, reg.Register(c.served)
}

func (c *component) Close() { c.reg.Unregister(c.served) }

// A component that unregisters what it registered passes the cycle.
func Example() {
	reg := regtest.CloseUnregisters(printT{}, func(reg *prometheus.Registry) func() {
		c, err := newComponent(reg)
		if err != nil {
			panic(err)
		}
		return c.Close
	})
	fmt.Println("families left:", regtest.Families(printT{}, reg))
	// Output: families left: 0
}
