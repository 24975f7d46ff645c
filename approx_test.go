package kvroute

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/approx"
	"github.com/kvroute/kvroute/render"
	"github.com/kvroute/kvroute/telemetry"
)

func approxIndex(t testing.TB, cfg approx.Config, set telemetry.Set) *approx.Index {
	t.Helper()
	ix, err := approx.New(cfg, approx.Options{Set: set})
	require.NoError(t, err)
	return ix
}

// Without KV events, a prompt sent to an endpoint is found there by the next
// request with its prefix (approximate mode), while new prompts spread by
// load; every decision says approximate.
func TestApproximateModeFollowsOwnDecisions(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	ix := approxIndex(t, approx.Config{Enabled: true}, telemetry.Set{})
	r := testRouter(t, func(c *Config) { c.Speculative.Enabled = new(false) }, Options{Set: telemetry.Set{Registerer: reg}, Approximate: ix})
	eps := endpoints(4)
	require.NoError(t, r.SetEndpoints(eps))
	shared := prompt(1, 1024)
	first := pick(t, r, shared, eps)
	require.Equal(t, approx.ModeApproximate, first.CacheMode)
	require.Zero(t, first.CachedTokens)
	first.Done(DoneInfo{})
	require.Equal(t, 1024/64, ix.Entries(first.Endpoint.ID))
	for i := 0; i < 3; i++ {
		d := pick(t, r, append(shared[:1024:1024], prompt(100+i, 128)...), eps)
		require.Equal(t, first.Endpoint.ID, d.Endpoint.ID, "the shared prefix stays where it was sent")
		require.Equal(t, 1024, d.CachedTokens)
		require.True(t, d.UsedCache)
		require.Equal(t, approx.ModeApproximate, d.CacheMode)
		d.Done(DoneInfo{})
	}
	seen := map[string]bool{}
	for i := 0; i < 8; i++ { // unrelated prompts, held open: they spread by load
		d := pick(t, r, prompt(200+i, 512), eps)
		seen[d.Endpoint.ID] = true
		defer d.Done(DoneInfo{})
	}
	require.Len(t, seen, 4)
	require.Equal(t, 12.0, testutil.ToFloat64(r.met.modes[approx.ModeApproximate]))
	require.Equal(t, 0.0, testutil.ToFloat64(r.met.modes[approx.ModePrecise]))
}

// Without KV events and without an approximate index every decision is
// blind, and so is one whose request has no block keys.
func TestBlindWithoutApproximateIndex(t *testing.T) {
	r := testRouter(t, nil, Options{})
	eps := endpoints(2)
	require.NoError(t, r.SetEndpoints(eps))
	d := pick(t, r, prompt(1, 256), eps)
	require.Equal(t, approx.ModeBlind, d.CacheMode)
	d.Done(DoneInfo{})

	ix := approxIndex(t, approx.Config{Enabled: true}, telemetry.Set{})
	r2 := testRouter(t, nil, Options{Approximate: ix})
	d, err := r2.Pick(context.Background(), &Request{Prompts: []render.Prompt{{TokenIDs: prompt(1, 20)}}}, eps) // under one block
	require.NoError(t, err)
	require.Equal(t, approx.ModeBlind, d.CacheMode, "no block keys: no cache information")
	d.Done(DoneInfo{})
	require.Equal(t, 2.0, testutil.ToFloat64(r.met.modes[approx.ModeBlind])+testutil.ToFloat64(r2.met.modes[approx.ModeBlind]))

	_, err = New(context.Background(), func() Config { c := DefaultConfig(); c.Model = testModel; c.Events.Enabled = new(false); return c }(), Options{Approximate: ix})
	require.ErrorIs(t, err, approx.ErrBound, "an index serves one router")
}

// The approximate entries expire on the router's clock.
func TestApproximateEntriesExpire(t *testing.T) {
	clk := telemetry.NewManual(time.Unix(1_700_000_000, 0))
	ix := approxIndex(t, approx.Config{Enabled: true, TTL: time.Minute}, telemetry.Set{Clock: clk})
	r := testRouter(t, func(c *Config) { c.Speculative.Enabled = new(false) }, Options{Set: telemetry.Set{Clock: clk}, Approximate: ix})
	eps := endpoints(2)
	require.NoError(t, r.SetEndpoints(eps))
	p := prompt(1, 512)
	d := pick(t, r, p, eps)
	d.Done(DoneInfo{})
	d2 := pick(t, r, p, eps)
	require.Equal(t, 512, d2.CachedTokens)
	d2.Done(DoneInfo{})
	clk.Advance(61 * time.Second)
	d3 := pick(t, r, p, eps)
	require.Zero(t, d3.CachedTokens)
	d3.Done(DoneInfo{})
}

// A request a gateway retried on a fallback is recorded approximately where
// it was served.
func TestApproximateFollowsServedFallback(t *testing.T) {
	ix := approxIndex(t, approx.Config{Enabled: true}, telemetry.Set{})
	r := testRouter(t, func(c *Config) { c.Speculative.Enabled = new(false) }, Options{Approximate: ix})
	eps := endpoints(3)
	require.NoError(t, r.SetEndpoints(eps))
	p := prompt(1, 512)
	d, err := r.Pick(context.Background(), &Request{Prompts: []render.Prompt{{TokenIDs: p}}, Fallbacks: 1}, eps)
	require.NoError(t, err)
	require.Len(t, d.Fallbacks, 1)
	fb := d.Fallbacks[0].Endpoint.ID
	require.True(t, d.Served(fb))
	d.Done(DoneInfo{})
	require.Equal(t, 512/64, ix.Entries(fb))
	d2 := pick(t, r, p, eps)
	require.Equal(t, 512, d2.CachedTokens)
	d2.Done(DoneInfo{})
}
