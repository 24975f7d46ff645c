package render

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
)

// A body the client edits (here min_tokens, set to 0 for the render) is
// sent in parts joined once; a hedge sends the same body from the hedge
// timer's goroutine, so the join must be done before the hedge can start
// (joining it lazily in each attempt raced when the hedge fired while the
// first attempt was joining; seen under -race in the e2e demo, not made
// deterministic here: this test holds the edited body's hedge to the same
// answer).
func TestHedgeSendsAnEditedBodyWithoutARace(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	a, b := newFakeVLLM(t, "a"), newFakeVLLM(t, "b")
	slow := newHeld()
	a.on("/v1/completions/render", slow.serve)
	c, clk, _ := pressureClient(t, func(*Config) {}, a, b)
	warm(t, c, "a", 50*time.Millisecond)

	body, err := json.Marshal(map[string]any{"model": "qwen3-8b", "prompt": "edited", "min_tokens": 5})
	require.NoError(t, err)
	res, errc := renderAsync(c, &Request{API: APICompletions, Body: body})
	<-slow.arrived
	clk.WaitForWaiters(1) // the hedge timer
	clk.Advance(time.Second)
	require.NoError(t, <-errc)
	require.Equal(t, "b", (<-res).Endpoint, "the hedge's answer")
}
