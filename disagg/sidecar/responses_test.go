package sidecar

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
)

// responsesBody is a Responses API request for content.
func responsesBody(content string, maxOutput int, stream bool) map[string]any {
	return map[string]any{"model": "m", "input": content, "max_output_tokens": maxOutput, "stream": stream}
}

// A Responses request naming a prefiller is split, as llm-d's sidecar
// splits /v1/responses: the prefiller (a simulated vLLM whose Responses
// API reads kv_transfer_params, as vLLM's does since 2026) computes the
// prompt and generates one token, and the decoder receives the whole
// prompt by transfer and generates the client's max_output_tokens,
// streamed or not. Before, the sidecar passed /v1/responses to the decoder
// unsplit, header removed: the decoder computed the whole prompt.
func TestSidecarSplitsResponses(t *testing.T) {
	t.Cleanup(leakcheck.Check(t)) // runs after every other cleanup
	pre, dec, reg, url := startSplit(t)

	code, _, b := send(t, url+ResponsesPath, pre.Addr(), responsesBody(longPrompt+"first", 6, false))
	require.Equal(t, http.StatusOK, code, string(b))
	var a struct {
		Status string `json:"status"`
		Usage  struct {
			Input   int `json:"input_tokens"`
			Output  int `json:"output_tokens"`
			Details struct {
				Cached int `json:"cached_tokens"`
			} `json:"input_tokens_details"`
		} `json:"usage"`
	}
	require.NoError(t, json.Unmarshal(b, &a))
	require.Equal(t, "completed", a.Status)
	require.Equal(t, 6, a.Usage.Output, "the decoder generated the client's max_output_tokens")
	require.Equal(t, a.Usage.Input-1, a.Usage.Details.Cached, "the decoder received the whole prompt")
	require.NotContains(t, string(b), "kv_transfer_params", "the client sees the decoder's answer")
	require.Equal(t, uint64(1), pre.Engine().Stats().GenerationTokens, "the prefiller generated one token")
	require.Equal(t, uint64(a.Usage.Input-1), dec.Engine().Stats().KVTransferTokens)

	requireStreamedSplit(t, url, ResponsesPath, pre, responsesBody(longPrompt+"second", 4, true),
		"response.output_text.delta", "response.completed", 4, 2)

	require.Equal(t, 2.0, counter(t, reg, "kvroute_sidecar_requests_total", "outcome", OutcomeSplit))
	require.Equal(t, 0.0, counter(t, reg, "kvroute_sidecar_requests_total", "outcome", OutcomeFallback))
}

// The prefill request of a Responses request asks for one token the
// Responses API's way, max_output_tokens (vLLM's ResponsesRequest has no
// max_tokens: with one, the prefiller would generate a whole answer), not
// stored and not in the background (the prefiller must answer at once and
// keep nothing); the decode request is the client's own with the
// prefiller's transfer parameters.
func TestResponsesPrefillBody(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	prefiller := startBodyRecorder(t, ResponsesPath,
		`{"id":"resp_1","object":"response","status":"completed","kv_transfer_params":{"do_remote_prefill":true,"remote_engine_id":"e"}}`)
	decoder := startBodyRecorder(t, "", `{"id":"resp_2","object":"response","status":"completed"}`)
	_, _, url := startSidecar(t, Config{DecoderURL: "http://" + decoder.addr})
	body := `{"model":"m","input":"hi","max_output_tokens":50,"stream":true,"store":true,"background":true,"previous_input_messages":null}`
	code, _, b := send(t, url+ResponsesPath, prefiller.addr, []byte(body))
	require.Equal(t, http.StatusOK, code, string(b))

	got := prefiller.body()
	require.Equal(t, `1`, string(got["max_output_tokens"]))
	require.NotContains(t, got, "max_tokens", "not a Responses field")
	require.Equal(t, `false`, string(got["stream"]))
	require.Equal(t, `false`, string(got["store"]))
	require.NotContains(t, got, "background")
	require.JSONEq(t, string(prefillRequestParams), string(got["kv_transfer_params"]))

	decoded := decoder.body()
	require.Equal(t, `50`, string(decoded["max_output_tokens"]))
	require.Equal(t, `true`, string(decoded["stream"]))
	require.Equal(t, `true`, string(decoded["store"]))
	require.Equal(t, `true`, string(decoded["background"]))
	require.JSONEq(t, `{"do_remote_prefill":true,"remote_engine_id":"e"}`, string(decoded["kv_transfer_params"]))
}
