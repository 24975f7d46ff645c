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
)

func scan(sse bool, chunks ...string) (int, string) {
	u := &usageScanner{sse: sse}
	for _, c := range chunks {
		u.write([]byte(c))
	}
	return u.result()
}

func TestUsageScanner(t *testing.T) {
	for _, tc := range []struct {
		name   string
		sse    bool
		chunks []string
		cached int
		result string
	}{
		{"json", false, []string{`{"id":"x","usage":{"prompt_tokens":300,"prompt_tokens_details":{"cached_tokens":256}}}`}, 256, usageObserved},
		{"json split", false, []string{`{"usage":{"prompt_tokens_details":{"cac`, `hed_tokens":64}}}`}, 64, usageObserved},
		{"json without details is 0", false, []string{`{"usage":{"prompt_tokens":10,"completion_tokens":2}}`}, 0, usageObserved},
		{"json null details is 0", false, []string{`{"usage":{"prompt_tokens":10,"prompt_tokens_details":null}}`}, 0, usageObserved},
		{"responses", false, []string{`{"object":"response","usage":{"input_tokens":80,"input_tokens_details":{"cached_tokens":64}}}`}, 64, usageObserved},
		{"anthropic", false, []string{`{"type":"message","usage":{"input_tokens":80,"cache_read_input_tokens":64}}`}, 64, usageObserved},
		{"json no usage", false, []string{`{"id":"x","choices":[]}`}, 0, usageAbsent},
		{"json invalid", false, []string{`{"usage":`}, 0, usageInvalid},
		{"json too large", false, []string{`{"usage":{},"pad":"` + strings.Repeat("a", maxUsageBytes) + `"}`}, 0, usageTooLarge},
		{"sse final usage chunk", true, []string{
			"data: {\"choices\":[{\"text\":\"a\"}],\"usage\":null}\n\n",
			"data: {\"choices\":[],\"usage\":{\"prompt_tokens\":200,\"prompt_tokens_details\":{\"cached_tokens\":1",
			"92}}}\n\ndata: [DONE]\n\n"}, 192, usageObserved},
		{"sse crlf", true, []string{"data: {\"usage\":{\"prompt_tokens_details\":{\"cached_tokens\":8}}}\r\n\r\n"}, 8, usageObserved},
		{"sse responses completed", true, []string{"event: response.completed\ndata: {\"response\":{\"usage\":{\"input_tokens_details\":{\"cached_tokens\":128}}}}\n\n"}, 128, usageObserved},
		{"sse without include_usage", true, []string{"data: {\"choices\":[{\"text\":\"a\"}]}\n\n", "data: [DONE]\n\n"}, 0, usageAbsent},
		{"sse last line without newline", true, []string{"data: {\"usage\":{\"prompt_tokens_details\":{\"cached_tokens\":4}}}"}, 4, usageObserved},
		{"sse line too long", true, []string{"data: {\"x\":\"" + strings.Repeat("a", maxUsageBytes) + "\"}\n\n"}, 0, usageTooLarge},
		{"sse usage after a long line", true, []string{"data: {\"x\":\"" + strings.Repeat("a", maxUsageBytes) + "\"}\n\n",
			"data: {\"usage\":{\"prompt_tokens_details\":{\"cached_tokens\":4}}}\n\n"}, 4, usageObserved},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cached, result := scan(tc.sse, tc.chunks...)
			require.Equal(t, tc.result, result)
			require.Equal(t, tc.cached, cached)
		})
	}
}

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
	require.Equal(t, 2.0, testutil.ToFloat64(h.handler.met.usage[usageObserved]))
	v, err := testutil.GatherAndCount(h.reg, "kvroute_router_prediction_stale_total")
	require.NoError(t, err)
	require.Equal(t, 1, v)
}
