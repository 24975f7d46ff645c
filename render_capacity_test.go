package kvroute

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/render"
)

// RenderCapacity shows the render client's per-endpoint load, and nothing
// for an unknown endpoint or a router that renders nothing.
func TestRenderCapacityShowsTheRenderPool(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Model = testModel
	cfg.Events.Enabled = new(false)
	cfg.Render.MaxConcurrency = new(3)
	r, err := New(context.Background(), cfg, Options{})
	require.NoError(t, err)
	defer r.Close()
	require.NoError(t, r.SetRenderEndpoints([]render.Endpoint{{ID: "renderer-0", URL: "http://127.0.0.1:1"}}))
	c, ok := r.RenderCapacity("renderer-0")
	require.True(t, ok)
	require.Equal(t, render.Capacity{Limit: 3}, c)
	require.False(t, c.Saturated())
	_, ok = r.RenderCapacity("renderer-1")
	require.False(t, ok)

	cfg.DisableRender = true
	off, err := New(context.Background(), cfg, Options{})
	require.NoError(t, err)
	defer off.Close()
	_, ok = off.RenderCapacity("renderer-0")
	require.False(t, ok)
}
