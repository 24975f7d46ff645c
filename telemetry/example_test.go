package telemetry_test

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvroute/kvroute/telemetry"
)

// A component takes a Set and reads it through its methods; a test drives
// its timers with a Manual clock.
func Example() {
	clock := telemetry.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	set := telemetry.Set{Registerer: prometheus.NewRegistry(), Clock: clock}

	timeout := set.Clk().NewTimer(5 * time.Second)
	clock.Advance(5 * time.Second)
	fmt.Println("timed out at", (<-timeout.C()).Format(time.TimeOnly))
	set.Log().Info("discarded: the Set has no logger")
	// Output: timed out at 00:00:05
}
