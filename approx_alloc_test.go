package kvroute

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/approx"
	"github.com/kvroute/kvroute/render"
	"github.com/kvroute/kvroute/telemetry"
)

// With the approximate index on and every endpoint approximate, a Pick whose
// prompt the index already holds allocates nothing either.
func TestApproximatePickAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's sync.Pool drops items at random: allocation counts vary")
	}
	ix := approxIndex(t, approx.Config{Enabled: true}, telemetry.Set{})
	r := testRouter(t, nil, Options{Approximate: ix})
	eps := endpoints(64)
	require.NoError(t, r.SetEndpoints(eps))
	req := &Request{Prompts: []render.Prompt{{TokenIDs: prompt(9, 2048)}}}
	ctx := context.Background()
	d, err := r.Pick(ctx, req, eps)
	require.NoError(t, err)
	want := d.Endpoint.ID
	d.Done(DoneInfo{})
	d.Release()
	allocs := testing.AllocsPerRun(200, func() {
		d, err := r.Pick(ctx, req, eps)
		if err != nil {
			t.Fatal(err)
		}
		if d.Endpoint.ID != want || d.CachedTokens != 2048 || d.CacheMode != approx.ModeApproximate {
			t.Fatalf("picked %s with %d cached tokens, mode %v", d.Endpoint.ID, d.CachedTokens, d.CacheMode)
		}
		d.Done(DoneInfo{})
		d.Release()
	})
	require.Zero(t, allocs)
}
