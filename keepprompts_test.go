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
	cfg := DefaultConfig()
	cfg.Model = testModel
	cfg.Events.Enabled = new(false)
	cfg.Render.URL = renderer.URL
	r, err := New(context.Background(), cfg, Options{})
	require.NoError(t, err)
	defer r.Close()
	eps := []Endpoint{{ID: strings.TrimPrefix(renderer.URL, "http://")}}
	require.NoError(t, r.SetEndpoints(eps))
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
