package kvroute

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/render"
)

// Request.KeepPrompts hands the rendered token IDs and the cache salt to the
// Decision, which owns them: the next pick renders into other arrays and
// leaves them untouched. Without it the Decision carries none.
func TestKeepPromptsHandsTheRenderedTokensToTheDecision(t *testing.T) {
	defer leakcheck.Check(t)()
	var n atomic.Int64
	renderer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i := n.Add(1)
		w.Header().Set("Content-Type", "application/json")
		if i == 1 {
			_, _ = w.Write([]byte(`[{"request_id":"r","token_ids":[1,2,3,4,5],"cache_salt":"s1"}]`))
			return
		}
		_, _ = w.Write([]byte(`[{"request_id":"r","token_ids":[9,9,9,9,9,9]}]`))
	}))
	defer renderer.Close()
	r, eps := renderedRouter(t, renderer.URL)
	defer r.Close()
	body := []byte(`{"model":"test-model","prompt":"hi"}`)

	d, err := r.Pick(context.Background(), &Request{API: render.APICompletions, Body: body, KeepPrompts: true}, eps)
	require.NoError(t, err)
	defer d.Done(DoneInfo{})
	require.Len(t, d.Prompts, 1)
	require.Equal(t, []uint32{1, 2, 3, 4, 5}, d.Prompts[0].TokenIDs)
	require.Equal(t, "s1", d.CacheSalt)

	for range 3 {
		d2, err := r.Pick(context.Background(), &Request{API: render.APICompletions, Body: body}, eps)
		require.NoError(t, err)
		require.Nil(t, d2.Prompts, "not asked for")
		d2.Done(DoneInfo{})
	}
	require.Equal(t, []uint32{1, 2, 3, 4, 5}, d.Prompts[0].TokenIDs, "later picks leave the Decision's tokens alone")

	given := []render.Prompt{{TokenIDs: []uint32{7, 8}}}
	d3, err := r.Pick(context.Background(), &Request{Prompts: given, CacheSalt: "g", KeepPrompts: true}, eps)
	require.NoError(t, err)
	defer d3.Done(DoneInfo{})
	require.Equal(t, given, d3.Prompts)
	require.Equal(t, "g", d3.CacheSalt)
}

// A released Decision hands the token arrays of the prompts it kept back to
// the router: the pick after next renders into them (the next one took the
// scratch's arrays), and a given prompt is never handed on.
func TestReleasedDecisionHandsItsRenderedArraysBack(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's sync.Pool drops items at random")
	}
	defer leakcheck.Check(t)()
	// One P: the pools are per P, and the render's network wait may resume
	// the test on another.
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	var n atomic.Int64
	renderer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i := n.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = fmt.Fprintf(w, `[{"request_id":"r","token_ids":[%d,2,3,4,5]}]`, i)
	}))
	defer renderer.Close()
	r, eps := renderedRouter(t, renderer.URL)
	defer r.Close()
	body := []byte(`{"model":"test-model","prompt":"hi"}`)
	keep := func() *Decision {
		d, err := r.Pick(context.Background(), &Request{API: render.APICompletions, Body: body, KeepPrompts: true}, eps)
		require.NoError(t, err)
		require.Len(t, d.Prompts, 1)
		return d
	}

	d1 := keep()
	first := &d1.Prompts[0].TokenIDs[0]
	require.Equal(t, []uint32{1, 2, 3, 4, 5}, d1.Prompts[0].TokenIDs)
	d1.Done(DoneInfo{})
	d1.Release()
	d2 := keep()
	require.Same(t, d1, d2, "the released Decision came back")
	require.NotSame(t, first, &d2.Prompts[0].TokenIDs[0])
	d3 := keep()
	require.Same(t, first, &d3.Prompts[0].TokenIDs[0], "rendered into the released Decision's array")
	require.Equal(t, []uint32{3, 2, 3, 4, 5}, d3.Prompts[0].TokenIDs)
	require.Equal(t, []uint32{2, 2, 3, 4, 5}, d2.Prompts[0].TokenIDs, "a kept Decision's tokens are left alone")
	d2.Done(DoneInfo{})
	d3.Done(DoneInfo{})

	given := []render.Prompt{{TokenIDs: []uint32{7, 8}}}
	d4, err := r.Pick(context.Background(), &Request{Prompts: given, KeepPrompts: true}, eps)
	require.NoError(t, err)
	d4.Done(DoneInfo{})
	d4.Release()
	for range 3 {
		d := keep()
		require.NotSame(t, &given[0].TokenIDs[0], &d.Prompts[0].TokenIDs[0])
		d.Done(DoneInfo{})
		d.Release()
	}
	require.Equal(t, []uint32{7, 8}, given[0].TokenIDs)
}

// renderedRouter is a Router of testModel rendering on url, without KV
// events, with that one endpoint set.
func renderedRouter(t *testing.T, url string) (*Router, []Endpoint) {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Model = testModel
	cfg.Events.Enabled = new(false)
	cfg.Render.URL = url
	r, err := New(context.Background(), cfg, Options{})
	require.NoError(t, err)
	eps := []Endpoint{{ID: strings.TrimPrefix(url, "http://")}}
	require.NoError(t, r.SetEndpoints(eps))
	return r, eps
}

// A rendered request is keyed by the render's salt only, as Request.CacheSalt
// says: the engine salts what the renderer read from the body, so a
// CacheSalt the caller set beside a body without one (or beside a Messages
// body, whose cache_salt vLLM drops) is not the engine's and is not used.
func TestRenderedRequestIgnoresTheCallersCacheSalt(t *testing.T) {
	defer leakcheck.Check(t)()
	renderer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`[{"request_id":"r","token_ids":[1,2,3,4,5],"cache_salt":null}]`))
	}))
	defer renderer.Close()
	r, eps := renderedRouter(t, renderer.URL)
	defer r.Close()
	body := []byte(`{"model":"test-model","prompt":"hi"}`)
	d, err := r.Pick(context.Background(), &Request{API: render.APICompletions, Body: body, CacheSalt: "caller", KeepPrompts: true}, eps)
	require.NoError(t, err)
	defer d.Done(DoneInfo{})
	require.Len(t, d.Prompts, 1)
	require.Empty(t, d.CacheSalt, "the engine caches this prompt unsalted")
}
