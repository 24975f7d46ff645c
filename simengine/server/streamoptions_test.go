package server

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
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
	const (
		completion = `"model":"m","prompt":"hello there","max_tokens":1`
		tokens     = `"model":"m","prompt":[5,6,7],"max_tokens":1` // decodeCompletion's fast path
		chat       = `"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":1`
	)
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
	} {
		for _, r := range []struct{ path, head string }{
			{"/v1/completions", completion}, {"/v1/completions/render", completion},
			{"/v1/completions", tokens}, {"/v1/completions/render", tokens},
			{"/v1/chat/completions", chat}, {"/v1/chat/completions/render", chat},
		} {
			body := "{" + r.head + c.fields + "}"
			resp, err := testClient.Post(base+r.path, "application/json", strings.NewReader(body))
			require.NoError(t, err)
			got, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			require.NoError(t, err)
			if c.ok {
				require.Equal(t, http.StatusOK, resp.StatusCode, "%s %s: %s", r.path, body, got)
				continue
			}
			require.Equal(t, http.StatusBadRequest, resp.StatusCode, "%s %s: %s", r.path, body, got)
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
