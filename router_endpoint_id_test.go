package kvroute

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/render"
	"github.com/kvroute/kvroute/telemetry"
)

// TestSetEndpointsBoundsIDs: an endpoint ID labels the per-endpoint metric
// series, so an empty one, one longer than a DNS name and a port, or one
// not UTF-8 is refused with an error naming its entry, and the endpoints
// already set stay as they were.
func TestSetEndpointsBoundsIDs(t *testing.T) {
	r := testRouter(t, nil, Options{})
	eps := endpoints(2)
	require.NoError(t, r.SetEndpoints(eps))

	longest := Endpoint{ID: strings.Repeat("a", 253) + ":8000"}
	require.NoError(t, r.SetEndpoints(append(endpoints(2), longest)))
	require.NoError(t, r.SetEndpoints(eps))

	for name, id := range map[string]string{
		"empty":    "",
		"too long": strings.Repeat("h", 1<<20) + ":8000",
		"not utf8": "\xff:8000",
	} {
		err := r.SetEndpoints(append(endpoints(2), Endpoint{ID: id}))
		require.ErrorIs(t, err, ErrInvalidConfig, name)
		require.ErrorContains(t, err, "endpoints[2]", name)
		require.Less(t, len(err.Error()), 300, name)
		r.mu.Lock()
		got := len(r.endpoints)
		_, kept := r.endpoints[eps[1].ID]
		r.mu.Unlock()
		require.Equal(t, 2, got, name)
		require.True(t, kept, name)
	}
}

// TestPickBoundsCandidateIDs: Pick's candidates need not have been given to
// SetEndpoints, but the chosen one's ID (and a fallback's, should it serve)
// labels the load tracker's series as theirs do, so a pick that would
// commit to an ID SetEndpoints would refuse fails with an error naming it,
// accounts nothing, and leaves every metric gatherable: one ID that is not
// UTF-8 would fail each scrape. The check is made on the IDs a commit
// names, not on every candidate of every lookup (Pick's hot path).
func TestPickBoundsCandidateIDs(t *testing.T) {
	defer leakcheck.Check(t)()
	reg := prometheus.NewRegistry()
	cfg := DefaultConfig()
	cfg.Model = testModel
	cfg.Events.Enabled = new(false)
	cfg.DisableRender = true
	r, err := New(context.Background(), cfg, Options{Set: telemetry.Set{Registerer: reg}})
	require.NoError(t, err)
	defer r.Close()
	require.NoError(t, r.SetEndpoints(nil))
	req := &Request{Prompts: []render.Prompt{{TokenIDs: prompt(1, 128)}}}
	for name, id := range map[string]string{
		"empty":    "",
		"too long": strings.Repeat("h", 1<<20) + ":8000",
		"not utf8": "\xff:8000",
	} {
		// Chosen: the only candidate.
		_, err := r.Pick(context.Background(), req, []Endpoint{{ID: id}})
		require.ErrorIs(t, err, ErrInvalidConfig, name)
		require.ErrorContains(t, err, "endpoints[0]", name)
		require.Less(t, len(err.Error()), 300, name)
		// Beside a good one with a fallback asked for: chosen or named
		// as the fallback (which carries the load if it serves), it is
		// refused either way.
		fb := &Request{Prompts: req.Prompts, Fallbacks: 1}
		_, err = r.Pick(context.Background(), fb, []Endpoint{{ID: "127.0.0.1:8000"}, {ID: id}})
		require.ErrorIs(t, err, ErrInvalidConfig, name)
		_, gerr := reg.Gather()
		require.NoError(t, gerr, name)
		n := 0
		r.Load().Range(func(string, int64, int64) bool { n++; return true })
		require.Zero(t, n, "%s: nothing accounted", name)
	}
	d, err := r.Pick(context.Background(), req, []Endpoint{{ID: "127.0.0.1:8000"}})
	require.NoError(t, err, "an endpoint SetEndpoints never named is still a candidate")
	d.Done(DoneInfo{})
}
