package server

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestStreamOptionsOnlyWithStreamAsVLLM: vLLM's completions and chat
// completions request models refuse stream_options (when set: a non-empty
// object, or any other value Python finds true) on a request that does
// not stream, with 400 BadRequestError, param "stream_options", on their
// render routes too, which read the same models. The simulated engine
// answers them so; stream_options with stream true, or {} and null
// without it, are served.
func TestStreamOptionsOnlyWithStreamAsVLLM(t *testing.T) {
	_, base := startServer(t, Config{EnableScaleOut: true})
	for _, c := range []struct {
		fields string
		ok     bool
	}{
		{`,"stream_options":{"include_usage":true}`, false},
		{`,"stream":false,"stream_options":{"include_usage":true}`, false},
		{`,"stream":null,"stream_options":{"continuous_usage_stats":false}`, false},
		{`,"stream":true,"stream_options":{"include_usage":true}`, true},
		{`,"stream":false,"stream_options":{}`, true},
		{`,"stream":false,"stream_options":null`, true},
		{`,"stream\u005foptions":{"include_usage":true}`, false}, // the name escaped: the same member
	} {
		for _, r := range validatedRoutes {
			body := "{" + r.head + c.fields + "}"
			code, got := post(t, base+r.path, json.RawMessage(body))
			if c.ok {
				require.Equal(t, http.StatusOK, code, "%s %s: %s", r.path, body, got)
				continue
			}
			require.Equal(t, http.StatusBadRequest, code, "%s %s: %s", r.path, body, got)
			var e errorBody
			require.NoError(t, json.Unmarshal(got, &e), string(got))
			require.Equal(t, "BadRequestError", e.Error.Type)
			require.Equal(t, errStreamOptions, e.Error.Message)
			require.NotNil(t, e.Error.Param)
			require.Equal(t, "stream_options", *e.Error.Param)
		}
	}
}

// truthy reads a JSON value as Python's truth value.
func TestTruthyAsPython(t *testing.T) {
	for v, want := range map[string]bool{
		"": false, "null": false, "false": false, "true": true, "0": false, "-0": false, "0.0": false, "0e5": false,
		"1": true, "-2.5": true, "1e400": true, `""`: false, `"x"`: true, `"\u0000"`: true,
		"[]": false, "[ ]": false, "[0]": true, "{}": false, "{ \n}": false, `{"a":1}`: true,
	} {
		var b []byte
		if v != "" {
			b = []byte(v)
		}
		require.Equal(t, want, truthy(b), "%q", v)
	}
}

// TestStreamOptionsDefaultsAsVLLM: vLLM's StreamOptions defaults
// include_usage to true and continuous_usage_stats to false, and keeps an
// explicit null as null. So stream_options {} (or one giving only
// continuous_usage_stats) asks for the usage chunk that ends a stream, and
// the render routes echo the defaults. The simulated engine read an absent
// include_usage as false: it ended such streams without usage and echoed
// include_usage false where vLLM's render answers true.
func TestStreamOptionsDefaultsAsVLLM(t *testing.T) {
	_, base := startServer(t, Config{EnableScaleOut: true})
	for _, c := range []struct {
		opts, echo string
		usage      bool
	}{
		{`{}`, `{"include_usage":true,"continuous_usage_stats":false}`, true},
		{`{"continuous_usage_stats":true}`, `{"include_usage":true,"continuous_usage_stats":true}`, true},
		{`{"include_usage":null}`, `{"include_usage":null,"continuous_usage_stats":false}`, false},
		{`{"include_usage":false,"continuous_usage_stats":null}`, `{"include_usage":false,"continuous_usage_stats":null}`, false},
	} {
		opts := json.RawMessage(c.opts)
		for _, r := range []struct {
			path string
			body map[string]any
		}{
			{"/v1/completions", map[string]any{"model": "m", "prompt": "hello", "max_tokens": 2}},
			{"/v1/chat/completions", map[string]any{"model": "m", "messages": []any{map[string]any{"role": "user", "content": "hi"}}, "max_tokens": 2}},
			{GeneratePath, map[string]any{"model": "m", "token_ids": []int{1, 2, 3}, "sampling_params": map[string]any{"max_tokens": 2}}},
		} {
			r.body["stream"], r.body["stream_options"] = true, opts
			evs := readSSE(t, base+r.path, r.body)
			require.Equal(t, "[DONE]", evs[len(evs)-1].data)
			var last struct {
				Usage *usage `json:"usage"`
			}
			require.NoError(t, json.Unmarshal([]byte(evs[len(evs)-2].data), &last))
			require.Equal(t, c.usage, last.Usage != nil, "%s %s: %s", r.path, c.opts, evs[len(evs)-2].data)
			if r.path == GeneratePath {
				continue
			}
			code, body := post(t, base+r.path+"/render", r.body)
			require.Equal(t, http.StatusOK, code, string(body))
			var g struct {
				StreamOptions json.RawMessage `json:"stream_options"`
			}
			if r.path == "/v1/completions" {
				g = decode[[]struct {
					StreamOptions json.RawMessage `json:"stream_options"`
				}](t, body)[0]
			} else {
				require.NoError(t, json.Unmarshal(body, &g))
			}
			require.JSONEq(t, c.echo, string(g.StreamOptions), "%s %s", r.path, c.opts)
		}
	}
}
