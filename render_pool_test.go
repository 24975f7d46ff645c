package kvroute

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/render"
)

// A render pool of its own: requests are tokenized by the pool's renderers
// in turn (with the retry on the other one when one fails), never by the
// routed engines, and SetEndpoints no longer changes the pool.
func TestSetRenderEndpointsRendersThroughItsOwnPool(t *testing.T) {
	defer leakcheck.Check(t)()
	var good, bad, engines atomic.Int64
	renderer := func(n *atomic.Int64, fail bool) *httptest.Server {
		return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			n.Add(1)
			w.Header().Set("Content-Type", "application/json")
			if fail {
				w.WriteHeader(http.StatusServiceUnavailable)
				_, _ = w.Write([]byte(`{"error":{"message":"down","type":"ServiceUnavailableError","param":null,"code":503}}`))
				return
			}
			_, _ = w.Write([]byte(`[{"request_id":"r","token_ids":[1,2,3,4,5]}]`))
		}))
	}
	ok, down := renderer(&good, false), renderer(&bad, true)
	defer ok.Close()
	defer down.Close()
	engine := renderer(&engines, false)
	defer engine.Close()

	cfg := DefaultConfig()
	cfg.Model = testModel
	cfg.Events.Enabled = new(false)
	r, err := New(context.Background(), cfg, Options{})
	require.NoError(t, err)
	defer r.Close()
	require.NoError(t, r.SetRenderEndpoints([]render.Endpoint{{ID: "good", URL: ok.URL}, {ID: "down", URL: down.URL}}))
	eps := []Endpoint{{ID: strings.TrimPrefix(engine.URL, "http://")}}
	require.NoError(t, r.SetEndpoints(eps))
	for range 6 {
		d, err := r.Pick(context.Background(), &Request{API: render.APICompletions, Body: []byte(`{"model":"test-model","prompt":"hi"}`)}, eps)
		require.NoError(t, err)
		require.NoError(t, d.RenderErr)
		require.Equal(t, 5, d.PromptTokens)
		d.Done(DoneInfo{})
	}
	require.EqualValues(t, 6, good.Load(), "every request rendered by the healthy renderer, directly or on the retry")
	require.Positive(t, bad.Load())
	require.Zero(t, engines.Load(), "the routed engines render nothing")

	cfg.Render.URL = ok.URL
	fixed, err := New(context.Background(), cfg, Options{})
	require.NoError(t, err)
	defer fixed.Close()
	require.ErrorIs(t, fixed.SetRenderEndpoints(nil), ErrFixedRenderURL)
}

// With KV events off, a router rendering on a pool of its own depends on
// no endpoint list: Pick works without SetEndpoints once the pool is set,
// instead of failing with ErrEndpointsNotSet as if nothing could render.
func TestRenderPoolWithoutEventsNeedsNoSetEndpoints(t *testing.T) {
	defer leakcheck.Check(t)()
	var rendered atomic.Int64
	renderer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rendered.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`[{"request_id":"r","token_ids":[1,2,3,4,5]}]`))
	}))
	defer renderer.Close()

	cfg := DefaultConfig()
	cfg.Model = testModel
	cfg.Events.Enabled = new(false)
	r, err := New(context.Background(), cfg, Options{})
	require.NoError(t, err)
	defer r.Close()
	req := &Request{API: render.APICompletions, Body: []byte(`{"model":"test-model","prompt":"hi"}`)}
	eps := []Endpoint{{ID: "127.0.0.1:1"}}
	_, err = r.Pick(context.Background(), req, eps)
	require.ErrorIs(t, err, ErrEndpointsNotSet, "rendering on the routed endpoints, which were never set")

	require.NoError(t, r.SetRenderEndpoints([]render.Endpoint{{ID: "renderer", URL: renderer.URL}}))
	d, err := r.Pick(context.Background(), req, eps)
	require.NoError(t, err)
	require.NoError(t, d.RenderErr)
	require.Equal(t, 5, d.PromptTokens)
	d.Done(DoneInfo{})
	require.EqualValues(t, 1, rendered.Load())
	require.True(t, r.Ready())
}
