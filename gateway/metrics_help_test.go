package gateway

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvroute/kvroute/telemetry"
)

// TestRequestsHelpNamesEveryResult checks that the requests counter's help,
// which operators read to learn the result label's values, names every
// Result the gateway counts.
func TestRequestsHelpNamesEveryResult(t *testing.T) {
	reg := prometheus.NewRegistry()
	if _, err := newMetrics(telemetry.Set{Registerer: reg}, func() int64 { return 0 }, func() int64 { return 0 }); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "kvroute_gateway_requests_total" {
			continue
		}
		for _, r := range results {
			if !strings.Contains(mf.GetHelp(), string(r)) {
				t.Errorf("help %q does not name result %q", mf.GetHelp(), r)
			}
		}
		return
	}
	t.Fatal("kvroute_gateway_requests_total not registered")
}
