package models

import (
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/internal/regtest"
)

// The names an endpoint's label lists that Annotate leaves out (invalid,
// overlong, repeated, beyond MaxModels: as the poller counts the names of
// an answer; a blank between commas is no name) are counted by endpoint,
// as of the last Annotate: annotating the same endpoints again counts them
// once, a label that no longer drops a name or an endpoint that left takes
// its series with it, and a label Served overrides is not read. They used
// to be left out without a trace, and repeats were not counted.
func TestAnnotateCountsTheNamesALabelDrops(t *testing.T) {
	reg := prometheus.NewRegistry()
	r, err := New(Config{
		Served: map[string][]string{"10.0.0.4:8000": {"llama"}},
		Poll:   PollConfig{MaxModels: 2},
	}, Options{Set: setWith(reg)})
	require.NoError(t, err)
	defer r.Close()
	lbl := func(v string) map[string]string { return map[string]string{DefaultLabel: v} }
	eps := []kvroute.Endpoint{
		{ID: "10.0.0.1:8000", Labels: lbl("llama, bad\x01name, qwen, mistral")}, // one invalid, one beyond 2
		{ID: "10.0.0.2:8000", Labels: lbl(strings.Repeat("m", MaxNameBytes+1))}, // none kept
		{ID: "10.0.0.3:8000", Labels: lbl("llama,llama, ,qwen")},                // a repeat dropped; a blank is no name
		{ID: "10.0.0.4:8000", Labels: lbl("\x01")},                              // Served wins: the label is not read
		{ID: "10.0.0.5:8000"}, // no label
	}
	got := r.Annotate(eps)
	require.Equal(t, []string{"llama", "qwen"}, got[0].Models)
	require.Empty(t, got[1].Models, "no name kept: the endpoint serves the base model")
	require.Equal(t, []string{"llama", "qwen"}, got[2].Models)
	require.Equal(t, []string{"llama"}, got[3].Models)
	want := map[string]float64{"10.0.0.1:8000": 2, "10.0.0.2:8000": 1, "10.0.0.3:8000": 1}
	require.Equal(t, want, regtest.ByLabel(t, reg, "kvroute_models_label_names_dropped", "endpoint"))

	r.Annotate(eps)
	require.Equal(t, want, regtest.ByLabel(t, reg, "kvroute_models_label_names_dropped", "endpoint"), "the same labels annotated again are the same drops")

	eps[0].Labels = lbl("llama")
	eps[2].Labels = lbl("llama, ,qwen")
	r.Annotate(eps[:3])
	require.Equal(t, map[string]float64{"10.0.0.2:8000": 1}, regtest.ByLabel(t, reg, "kvroute_models_label_names_dropped", "endpoint"), "a fixed label drops nothing")
	r.Annotate(eps[2:])
	require.Equal(t, []string{"llama", "qwen"}, r.Annotate(eps[2:])[0].Models)
	require.Empty(t, regtest.ByLabel(t, reg, "kvroute_models_label_names_dropped", "endpoint"), "an endpoint that left takes its series with it")
}

// Annotate is safe for concurrent use: the drops are counted under the
// Registry's lock (go test -race), and the last Annotate's are what stays.
func TestAnnotateCountsLabelDropsConcurrently(t *testing.T) {
	reg := prometheus.NewRegistry()
	r, err := New(Config{}, Options{Set: setWith(reg)})
	require.NoError(t, err)
	defer r.Close()
	eps := []kvroute.Endpoint{{ID: "10.0.0.1:8000", Labels: map[string]string{DefaultLabel: "llama,\x01"}}}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 50 {
				r.Annotate(eps)
			}
		})
	}
	wg.Wait()
	require.Equal(t, map[string]float64{"10.0.0.1:8000": 1}, regtest.ByLabel(t, reg, "kvroute_models_label_names_dropped", "endpoint"))
}
