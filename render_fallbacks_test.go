package kvroute

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/render"
	"github.com/kvroute/kvroute/telemetry"
)

// probeProfile renders the request once before its pick and releases that
// Selection without a commit, as a session profile renders a
// conversation's opening to derive its key.
type probeProfile struct{}

func (probeProfile) Pick(ctx context.Context, req *Request, endpoints []Endpoint, stages Picker) (*Decision, error) {
	m := stages.(interface {
		Match(context.Context, *Request, []Endpoint) (*Selection, error)
	})
	s, err := m.Match(ctx, &Request{API: req.API, Body: req.Body}, endpoints)
	if err != nil {
		return nil, err
	}
	s.Release()
	return stages.Pick(ctx, req, endpoints)
}

// dropAll is a filter that keeps no candidate.
type dropAll struct{}

func (dropAll) Filter(*Selection, []int) []int { return nil }

// failingRenderRouter is a router whose renderer, a real HTTP server,
// answers every render 500.
func failingRenderRouter(t *testing.T, opts Options) (*Router, *atomic.Int64) {
	t.Helper()
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		calls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = w.Write([]byte(`{"error":{"message":"boom","type":"InternalServerError","param":null,"code":500}}`))
	}))
	t.Cleanup(srv.Close)
	cfg := DefaultConfig()
	cfg.Model = testModel
	cfg.Events.Enabled = new(false)
	cfg.Render.URL = srv.URL
	opts.Set = telemetry.Set{Registerer: prometheus.NewRegistry()}
	r, err := New(context.Background(), cfg, opts)
	require.NoError(t, err)
	t.Cleanup(r.Close)
	return r, &calls
}

var fallbackBody = []byte(`{"model":"test-model","prompt":"hello"}`)

// kvroute_router_render_fallbacks_total counts routed requests, once each:
// a profile that renders the request twice (a probe, then the pick) routes
// it once, and a request whose render failed and which is then not routed
// (the filters kept no candidate, or a host released its Selection without
// a commit) is not counted. It used to count every failed render.
func TestRenderFallbacksCountRoutedRequestsOnce(t *testing.T) {
	defer leakcheck.Check(t)()
	eps := endpoints(3)

	t.Run("profile renders twice", func(t *testing.T) {
		r, calls := failingRenderRouter(t, Options{Profile: probeProfile{}})
		d, err := r.Pick(context.Background(), &Request{API: render.APICompletions, Body: fallbackBody}, eps)
		require.NoError(t, err)
		require.Error(t, d.RenderErr)
		d.Done(DoneInfo{})
		require.EqualValues(t, 2, calls.Load(), "the probe and the pick each rendered")
		require.Equal(t, 1.0, testutil.ToFloat64(r.met.renderFallbacks), "one routed request")
		require.Equal(t, 1.0, testutil.ToFloat64(r.met.decisions[decisionLoadOnly]))
	})

	t.Run("not routed", func(t *testing.T) {
		r, calls := failingRenderRouter(t, Options{Filters: []Filter{dropAll{}}})
		_, err := r.Pick(context.Background(), &Request{API: render.APICompletions, Body: fallbackBody}, eps)
		require.ErrorIs(t, err, ErrNoEndpoints)
		require.EqualValues(t, 1, calls.Load())
		require.Zero(t, testutil.ToFloat64(r.met.renderFallbacks), "nothing was routed")
	})

	t.Run("host stages", func(t *testing.T) {
		r, _ := failingRenderRouter(t, Options{})
		s, err := r.Match(context.Background(), &Request{API: render.APICompletions, Body: fallbackBody}, eps)
		require.NoError(t, err)
		s.Release() // the host routed it elsewhere, or not at all
		require.Zero(t, testutil.ToFloat64(r.met.renderFallbacks))

		s, err = r.Match(context.Background(), &Request{API: render.APICompletions, Body: fallbackBody}, eps)
		require.NoError(t, err)
		d, err := s.Commit(0)
		require.NoError(t, err)
		s.Release()
		require.Error(t, d.RenderErr)
		d.Done(DoneInfo{})
		require.Equal(t, 1.0, testutil.ToFloat64(r.met.renderFallbacks))
	})
}
