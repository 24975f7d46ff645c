package sidecar

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
)

// messagesBody is an Anthropic Messages request for content.
func messagesBody(content string, maxTokens int, stream bool) map[string]any {
	return map[string]any{"model": "m", "max_tokens": maxTokens, "stream": stream,
		"messages": []map[string]any{{"role": "user", "content": content}}}
}

// A Messages request naming a prefiller is split, as llm-d's newer sidecar
// splits /v1/messages: the prefiller (a simulated vLLM whose Messages API
// reads kv_transfer_params and answers them, as vLLM's does) computes the
// prompt and generates one token, and the decoder receives the whole
// prompt by transfer and generates the client's max_tokens, streamed or
// not. Before, the sidecar passed /v1/messages to the decoder unsplit,
// header removed: the decoder computed the whole prompt.
func TestSidecarSplitsMessages(t *testing.T) {
	t.Cleanup(leakcheck.Check(t)) // runs after every other cleanup
	pre, dec, reg, url := startSplit(t)

	code, _, b := send(t, url+MessagesPath, pre.Addr(), messagesBody(longPrompt+"first", 6, false))
	require.Equal(t, http.StatusOK, code, string(b))
	var a struct {
		Type  string `json:"type"`
		Usage struct {
			Input  int `json:"input_tokens"`
			Output int `json:"output_tokens"`
		} `json:"usage"`
	}
	require.NoError(t, json.Unmarshal(b, &a))
	require.Equal(t, "message", a.Type)
	require.Equal(t, 6, a.Usage.Output, "the decoder generated the client's max_tokens")
	require.NotContains(t, string(b), "kv_transfer_params", "the client sees the decoder's answer")
	require.Equal(t, uint64(1), pre.Engine().Stats().GenerationTokens, "the prefiller generated one token")
	require.Equal(t, uint64(a.Usage.Input-1), dec.Engine().Stats().KVTransferTokens, "the decoder received the whole prompt")

	requireStreamedSplit(t, url, MessagesPath, pre, messagesBody(longPrompt+"second", 4, true),
		"content_block_delta", "message_stop", 4, 2)

	require.Equal(t, 2.0, counter(t, reg, "kvroute_sidecar_requests_total", "outcome", OutcomeSplit))
	require.Equal(t, 0.0, counter(t, reg, "kvroute_sidecar_requests_total", "outcome", OutcomeFallback))
	require.Equal(t, 0.0, counter(t, reg, "kvroute_sidecar_requests_total", "outcome", OutcomePlain))
}

// The prefill request of a Messages request asks for one token with
// max_tokens (the Messages API's limit, which vLLM's
// AnthropicMessagesRequest requires and hands to the chat completion as
// both max_tokens and max_completion_tokens), stream false and the
// transfer parameters, every other field kept and no field of another API
// added; the decode request is the client's own with the prefiller's
// transfer parameters. The gateway's Exchange builds the same bodies.
func TestMessagesPrefillBody(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	prefiller := startBodyRecorder(t, MessagesPath,
		`{"id":"msg_1","type":"message","role":"assistant","content":[],"kv_transfer_params":{"do_remote_prefill":true,"remote_engine_id":"e"}}`)
	decoder := startBodyRecorder(t, "", `{"id":"msg_2","type":"message","role":"assistant","content":[]}`)
	_, _, url := startSidecar(t, Config{DecoderURL: "http://" + decoder.addr})
	body := `{"model":"m","max_tokens":50,"stream":true,"system":"be brief","temperature":0.5,"messages":[{"role":"user","content":"hi"}]}`
	code, _, b := send(t, url+MessagesPath, prefiller.addr, []byte(body))
	require.Equal(t, http.StatusOK, code, string(b))

	got := prefiller.body()
	require.Equal(t, `1`, string(got["max_tokens"]))
	require.Equal(t, `false`, string(got["stream"]))
	require.JSONEq(t, string(prefillRequestParams), string(got["kv_transfer_params"]))
	require.Equal(t, `"be brief"`, string(got["system"]))
	require.Equal(t, `0.5`, string(got["temperature"]))
	for _, k := range []string{"max_output_tokens", "store", "max_completion_tokens", "min_tokens", "stream_options"} {
		require.NotContains(t, got, k, "not a Messages field")
	}

	decoded := decoder.body()
	require.Equal(t, `50`, string(decoded["max_tokens"]))
	require.Equal(t, `true`, string(decoded["stream"]))
	require.Equal(t, `"be brief"`, string(decoded["system"]))
	require.JSONEq(t, `{"do_remote_prefill":true,"remote_engine_id":"e"}`, string(decoded["kv_transfer_params"]))

	// The Exchange a gateway runs splits the route the same way.
	x, err := NewExchange(Config{}, Options{})
	require.NoError(t, err)
	t.Cleanup(x.Close)
	res, err := x.Prefill(context.Background(), prefiller.addr, MessagesPath, nil, []byte(body))
	require.NoError(t, err)
	require.True(t, res.Split, res.Fallback)
	require.Equal(t, `1`, string(prefiller.body()["max_tokens"]))
	require.Contains(t, string(res.DecodeBody), `"max_tokens":50`)
	require.Contains(t, string(res.DecodeBody), `"kv_transfer_params":{"do_remote_prefill":true,"remote_engine_id":"e"}`)
	require.True(t, SplitPath(MessagesPath))
	require.False(t, SplitPath(MessagesPath+"/count_tokens"), "counting tokens runs nothing to transfer")
}

// A Messages request forcing a named tool (tool_choice {"type":"tool"}) is
// not sent to the prefiller it names: vLLM serves it as a named-tool chat
// completion and decodes the generated text as the tool call's JSON input
// to build its tool_use block, which a one-token prefill answer is not, so
// the prefiller (a simulated vLLM that answers so) fails it 500 with its
// blocks held for a decoder that never comes. The decoder prefills it
// itself at once, counted as a fallback with reason forced_tool. Before,
// every such request paid a prefill for nothing, counted status. A
// Messages request with tool_choice {"type":"any"} still splits.
func TestSidecarMessagesForcedToolPrefillsLocally(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	pre, dec, reg, url := startSplit(t)
	body := func(content string, choice map[string]any) map[string]any {
		b := messagesBody(longPrompt+content, 4, true)
		b["tools"] = []map[string]any{{"name": "get", "input_schema": map[string]any{"type": "object"}}}
		b["tool_choice"] = choice
		return b
	}

	code, _, b := send(t, url+MessagesPath, pre.Addr(), body("first", map[string]any{"type": "tool", "name": "get"}))
	require.Equal(t, http.StatusOK, code, string(b))
	require.Equal(t, 4, strings.Count(string(b), "event: content_block_delta"), string(b))
	require.Zero(t, pre.Engine().Stats().GenerationTokens, "no prefill was sent")
	require.Zero(t, dec.Engine().Stats().KVTransferTokens, "the decoder prefilled it")
	require.Equal(t, 1.0, counter(t, reg, "kvroute_sidecar_prefill_fallbacks_total", "reason", ReasonForcedTool))
	require.Equal(t, 0.0, counter(t, reg, "kvroute_sidecar_prefill_fallbacks_total", "reason", ReasonStatus))
	require.Equal(t, 1.0, counter(t, reg, "kvroute_sidecar_requests_total", "outcome", OutcomeFallback))

	code, _, b = send(t, url+MessagesPath, pre.Addr(), body("second", map[string]any{"type": "any"}))
	require.Equal(t, http.StatusOK, code, string(b))
	require.Equal(t, uint64(1), pre.Engine().Stats().GenerationTokens, "one prefill")
	require.Equal(t, 1.0, counter(t, reg, "kvroute_sidecar_requests_total", "outcome", OutcomeSplit))
}
