package kvroute

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/render"
	"github.com/kvroute/kvroute/telemetry"
)

// The router hands its clock to its render client: on a manual clock that
// never advances, every render takes zero seconds by the render latency
// metric (on the wall clock it would take some).
func TestRouterRendersOnItsClock(t *testing.T) {
	defer leakcheck.Check(t)()
	renderer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`[{"request_id":"r","token_ids":[1,2,3,4,5]}]`))
	}))
	defer renderer.Close()
	cfg := DefaultConfig()
	cfg.Model = testModel
	cfg.Events.Enabled = new(false)
	reg := prometheus.NewRegistry()
	r, err := New(context.Background(), cfg, Options{Set: telemetry.Set{Registerer: reg, Clock: telemetry.NewManual(time.Unix(1e9, 0))}})
	require.NoError(t, err)
	defer r.Close()
	eps := []Endpoint{{ID: strings.TrimPrefix(renderer.URL, "http://")}}
	require.NoError(t, r.SetEndpoints(eps))
	d, err := r.Pick(context.Background(), &Request{API: render.APICompletions, Body: []byte(`{"model":"test-model","prompt":"hi"}`)}, eps)
	require.NoError(t, err)
	require.NoError(t, d.RenderErr)
	d.Done(DoneInfo{})
	mfs, err := reg.Gather()
	require.NoError(t, err)
	var count uint64
	for _, mf := range mfs {
		if mf.GetName() != render.MetricDuration {
			continue
		}
		for _, m := range mf.GetMetric() {
			count += m.GetHistogram().GetSampleCount()
			require.Zero(t, m.GetHistogram().GetSampleSum(), "render latency measured on the router's manual clock")
		}
	}
	require.EqualValues(t, 1, count)
}
