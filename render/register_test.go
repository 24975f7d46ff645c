package render

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/telemetry"
)

// renderFamilies returns how many of the render metric families reg
// gathers (they appear once a call has been observed or a label child
// resolved; New resolves every child, so they appear at once).
func renderFamilies(t *testing.T, reg *prometheus.Registry) int {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	n := 0
	for _, mf := range mfs {
		if name := mf.GetName(); name == MetricDuration || name == MetricFailures {
			n++
		}
	}
	return n
}

// TestCloseUnregisters checks the registration policy: New registers the
// Client's metrics, Close unregisters exactly those, a Client built again
// on the same registry registers without error, and a Client that reused
// another's collectors leaves them registered when it closes.
func TestCloseUnregisters(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"fixed url", Config{URL: "http://127.0.0.1:1"}},
		{"endpoints", Config{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			opts := Options{Set: telemetry.Set{Registerer: reg}}
			for range 2 {
				c, err := New(tc.cfg, opts)
				require.NoError(t, err)
				require.Equal(t, 2, renderFamilies(t, reg), "metrics not registered")
				c.Close()
				require.Zero(t, renderFamilies(t, reg), "metrics left after Close")
				c.Close() // idempotent
			}

			owner, err := New(tc.cfg, opts)
			require.NoError(t, err)
			sharer, err := New(tc.cfg, opts)
			require.NoError(t, err, "a second Client reuses the registered collectors")
			sharer.Close()
			require.Equal(t, 2, renderFamilies(t, reg), "the sharer's Close removed the owner's metrics")
			owner.Close()
			require.Zero(t, renderFamilies(t, reg))
		})
	}
}

// An endpoint ID labels the capacity gauges, so SetEndpoints leaves out
// (and reports) one that cannot be a label value or is longer than any
// host:port: an ID that is not UTF-8 made every scrape panic in the
// collector (prometheus.MustNewConstMetric), and one of any length made a
// series of that size.
func TestSetEndpointsRefusesIDsThatCannotLabelTheGauges(t *testing.T) {
	reg := prometheus.NewRegistry()
	c, err := New(Config{}, Options{Set: telemetry.Set{Registerer: reg}})
	require.NoError(t, err)
	defer c.Close()
	long := strings.Repeat("a", 300)
	err = c.SetEndpoints([]Endpoint{
		{ID: "bad-\xff", URL: "http://127.0.0.1:1"},
		{ID: long, URL: "http://127.0.0.1:2"},
		{ID: "10.0.0.7:8000", URL: "http://127.0.0.1:3"},
	})
	require.Error(t, err)
	require.Equal(t, []Endpoint{{ID: "10.0.0.7:8000", URL: "http://127.0.0.1:3"}}, c.Endpoints())
	_, err = reg.Gather()
	require.NoError(t, err)
}

// The failures counter's help names every reason it is labelled with,
// kvroute's saturated included.
func TestFailuresHelpNamesEveryReason(t *testing.T) {
	reg := prometheus.NewRegistry()
	c, err := New(Config{}, Options{Set: telemetry.Set{Registerer: reg}})
	require.NoError(t, err)
	defer c.Close()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != MetricFailures {
			continue
		}
		for _, r := range failureReasons {
			require.Contains(t, mf.GetHelp(), string(r))
		}
		return
	}
	t.Fatal("no failures counter")
}
