package gateway

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/internal/usage"
)

// The gateway reads the engine's cached_tokens from JSON and SSE responses
// and closes the loop: the router's observation metrics and the recent
// decisions show the prediction error.
func TestGatewayObservesCachedTokens(t *testing.T) {
	defer leakcheck.Check(t)()
	h := newHarness(t, 1, Config{ObserveCachedTokens: true})
	defer h.close()
	ep := h.eps[0].ID
	prompt := strings.Repeat("tok ", 300)
	h.warm(ep, prompt)
	n := len(promptTokens(prompt))
	reusable := (n - 1) / 64 * 64
	actual := reusable
	h.ups[0].setInfer(func(w http.ResponseWriter, r *http.Request) {
		bodies, _ := h.ups[0].received() // the upstream read the body already
		if strings.Contains(string(bodies[len(bodies)-1]), `"stream":true`) {
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprintf(w, "data: {\"choices\":[{\"text\":\"a\"}]}\n\n")
			w.(http.Flusher).Flush()
			fmt.Fprintf(w, "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":%d,\"prompt_tokens_details\":{\"cached_tokens\":%d}}}\n\ndata: [DONE]\n\n", n, actual-64)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"choices":[{"text":"a"}],"usage":{"prompt_tokens":%d,"prompt_tokens_details":{"cached_tokens":%d}}}`, n, actual)
	})
	resp := h.post("/v1/completions", completionsBody(prompt, false))
	readAll(t, resp)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	// The record is filed as the handler returns, which may be after the client read the body.
	require.Eventually(t, func() bool { return len(h.handler.Recent()) == 1 }, wait, time.Millisecond)
	resp = h.post("/v1/completions", completionsBody(prompt, true))
	readAll(t, resp)
	require.Eventually(t, func() bool { return len(h.handler.Recent()) == 2 }, wait, time.Millisecond)

	recent := h.handler.Recent()
	require.Equal(t, actual-64, recent[0].ActualCached, "newest first: the stream")
	require.Equal(t, 64, recent[0].Error, "the index predicted a block the engine did not reuse")
	require.Equal(t, actual, recent[1].ActualCached)
	require.Equal(t, 0, recent[1].Error)
	require.Equal(t, ResultSuccess, recent[1].Result)
	require.Equal(t, 2.0, testutil.ToFloat64(h.handler.met.usage[usage.Observed]))
	v, err := testutil.GatherAndCount(h.reg, "kvroute_router_prediction_stale_total")
	require.NoError(t, err)
	require.Equal(t, 1, v)
}

// The buffer that reads a response's usage is charged to the body budget:
// a response whose buffer finds no room is passed through whole and unread
// (no_room), and every byte comes back once the response ended.
func TestGatewayUsageBufferWithinBodyBudget(t *testing.T) {
	defer leakcheck.Check(t)()
	h := newHarness(t, 1, Config{ObserveCachedTokens: true, MaxBodyBytes: 8192, MaxBodyBytesInFlight: 8192})
	defer h.close()
	pad := strings.Repeat("a", 10_000)
	h.ups[0].setInfer(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"choices":[{"text":%q}],"usage":{"prompt_tokens_details":{"cached_tokens":16}}}`, pad)
	})
	resp := h.post("/v1/completions", completionsBody(strings.Repeat("tok ", 100), false))
	body := readAll(t, resp)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, body, pad, "passed through whole")
	require.Eventually(t, func() bool { return len(h.handler.Recent()) == 1 }, wait, time.Millisecond)
	require.Equal(t, 1.0, testutil.ToFloat64(h.handler.met.usage[usage.NoRoom]))
	require.Zero(t, testutil.ToFloat64(h.handler.met.usage[usage.Observed]))
	require.Eventually(t, func() bool { return h.handler.budget.InUse() == 0 }, wait, time.Millisecond,
		"the body and the usage buffer given back as the handler returns")
}
