package extproc

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
)

// The picker's own answers to a request on Anthropic's /v1/messages (and
// its /v1/messages/count_tokens, which Claude Code calls) are in
// Anthropic's error shape, as vLLM answers them (an Anthropic client
// reads error.type from it; llm-d's picker answers in plain text); every
// other path gets vLLM's OpenAI shape.
func TestProcessErrorShapeFollowsTheAPI(t *testing.T) {
	defer leakcheck.Check(t)()
	h := newHarness(t, Config{}) // no endpoint: every request is 503
	defer h.close()
	for _, path := range []string{"/v1/messages", "/v1/messages/", "/v1/%6Dessages", "/v1/messages/count_tokens", "/v1/chat/completions"} {
		st, err := h.client.Process(ctxT(t))
		require.NoError(t, err)
		require.NoError(t, st.Send(envoyHeaders(path, false, nil)))
		require.NoError(t, st.Send(bodyChunk(`{"model":"m","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`, true)))
		resp, err := st.Recv()
		require.NoError(t, err)
		ir := resp.GetImmediateResponse()
		require.EqualValues(t, http.StatusServiceUnavailable, ir.GetStatus().GetCode(), path)
		require.Equal(t, "application/json", setHeader(ir.GetHeaders(), "content-type"))
		var body map[string]any
		require.NoError(t, json.Unmarshal(ir.GetBody(), &body), path)
		e, ok := body["error"].(map[string]any)
		require.True(t, ok, "%s: %s", path, ir.GetBody())
		require.NotEmpty(t, e["message"])
		if path == "/v1/chat/completions" {
			require.Equal(t, "ServiceUnavailableError", e["type"], path)
			require.EqualValues(t, http.StatusServiceUnavailable, e["code"])
			continue
		}
		require.Equal(t, "error", body["type"], "%s: %s", path, ir.GetBody())
		require.Equal(t, "overloaded_error", e["type"], path)
		require.Len(t, e, 2, "Anthropic's error has a type and a message: %s", ir.GetBody())
	}
}
