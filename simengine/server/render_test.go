package server

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/kvroute/kvroute/simengine"
	"github.com/stretchr/testify/require"
)

var renderRoutes = []string{"/v1/completions/render", "/v1/chat/completions/render", "/v1/messages/render", "/v1/responses/render"}

func TestRenderNotFoundWithoutScaleOut(t *testing.T) {
	_, base := startServer(t, Config{})
	for _, p := range renderRoutes {
		code, body := post(t, base+p, map[string]any{"model": "m", "prompt": "x"})
		require.Equal(t, http.StatusNotFound, code, p)
		require.JSONEq(t, `{"detail":"Not Found"}`, string(body), p)
	}
	// The generation routes are there.
	code, _ := post(t, base+"/v1/completions", map[string]any{"model": "m", "prompt": "x", "max_tokens": 1})
	require.Equal(t, http.StatusOK, code)
}

func TestRenderUnknownModel(t *testing.T) {
	_, base := startServer(t, Config{EnableScaleOut: true})
	bodies := []map[string]any{
		{"model": "other", "prompt": "x"},
		chatBody("x", 1),
		{"model": "other", "max_tokens": 1, "messages": []map[string]any{{"role": "user", "content": "x"}}},
		{"model": "other", "input": "x"},
	}
	bodies[1]["model"] = "other"
	for i, p := range renderRoutes {
		code, body := post(t, base+p, bodies[i])
		require.Equal(t, http.StatusNotFound, code, p)
		require.JSONEq(t, "{\"error\":{\"message\":\"The model `other` does not exist.\",\"type\":\"NotFoundError\",\"param\":\"model\",\"code\":404}}", string(body), p)
	}
	code, body := post(t, base+"/v1/chat/completions", bodies[1])
	require.Equal(t, http.StatusNotFound, code, "generation routes check the model too")
	require.Contains(t, string(body), "NotFoundError")
}

func TestRenderShapes(t *testing.T) {
	_, base := startServer(t, Config{EnableScaleOut: true})

	code, body := post(t, base+"/v1/completions/render", map[string]any{"model": "m", "prompt": []string{"Hello world", "Bye"}, "max_tokens": 3, "cache_salt": "s1"})
	require.Equal(t, http.StatusOK, code, string(body))
	arr := decode[[]map[string]any](t, body)
	require.Len(t, arr, 2, "one GenerateRequest per prompt")
	for _, k := range []string{"request_id", "token_ids", "token_offsets", "features", "content_parts", "sampling_params",
		"model", "reasoning_ended", "reasoning_parser_kwargs", "return_token_ids", "output_mode", "stream",
		"stream_options", "cache_salt", "priority", "kv_transfer_params", "ec_transfer_params"} {
		require.Contains(t, arr[0], k, "null fields are present, as model_dump_json writes them")
	}
	require.Nil(t, arr[0]["features"])
	require.Equal(t, "s1", arr[0]["cache_salt"])
	require.Equal(t, "m", arr[0]["model"])
	require.Equal(t, "tokens", arr[0]["output_mode"])
	require.Regexp(t, `^cmpl-`, arr[0]["request_id"])
	require.Equal(t, float64(3), arr[0]["sampling_params"].(map[string]any)["max_tokens"])
	type gen struct {
		RequestID string   `json:"request_id"`
		TokenIDs  []uint32 `json:"token_ids"`
		Features  any      `json:"features"`
		CacheSalt *string  `json:"cache_salt"`
	}
	gens := decode[[]gen](t, body)
	require.Equal(t, simengine.Tokenize(nil, "Hello world"), gens[0].TokenIDs)
	require.Equal(t, simengine.Tokenize(nil, "Bye"), gens[1].TokenIDs)

	// A token-ID prompt still renders (the router sends those too).
	code, body = post(t, base+"/v1/completions/render", map[string]any{"prompt": []int{5, 6, 7}})
	require.Equal(t, http.StatusOK, code, string(body))
	require.Equal(t, []uint32{5, 6, 7}, decode[[]gen](t, body)[0].TokenIDs)

	want, err := simengine.ApplyChatTemplate(nil, []simengine.Message{{Role: "system", Content: "You are a simulated engine."}, {Role: "user", Content: "Hi there"}}, "", true)
	require.NoError(t, err)
	code, body = post(t, base+"/v1/chat/completions/render", chatBody("Hi there", 5))
	require.Equal(t, http.StatusOK, code, string(body))
	g := decode[gen](t, body)
	require.Equal(t, want, g.TokenIDs)
	require.Regexp(t, `^chatcmpl-`, g.RequestID)
	require.Nil(t, g.CacheSalt)

	// Messages and Responses use the same template: same conversation, same tokens.
	code, body = post(t, base+"/v1/messages/render", map[string]any{"model": "m", "max_tokens": 5,
		"system":   []map[string]any{{"type": "text", "text": "You are a simulated engine."}},
		"messages": []map[string]any{{"role": "user", "content": []map[string]any{{"type": "text", "text": "Hi there"}}}}})
	require.Equal(t, http.StatusOK, code, string(body))
	require.Equal(t, want, decode[gen](t, body).TokenIDs)

	code, body = post(t, base+"/v1/responses/render", map[string]any{"model": "m", "instructions": "You are a simulated engine.", "input": "Hi there"})
	require.Equal(t, http.StatusOK, code, string(body))
	require.Equal(t, want, decode[gen](t, body).TokenIDs)

	code, body = post(t, base+"/v1/responses/render", map[string]any{"model": "m", "input": "x", "previous_response_id": "resp_1"})
	require.Equal(t, http.StatusBadRequest, code)
	require.JSONEq(t, `{"error":{"message":"previous_response_id is not supported: the simulated engine stores no responses","type":"invalid_request_error","param":"previous_response_id","code":400}}`, string(body))
}

func TestRenderMatchesEngineEvents(t *testing.T) {
	rec := newRecorder()
	_, base := startServer(t, Config{EnableScaleOut: true, Engine: func() simengine.Config { c := fastEngine(); c.Sink = rec; return c }()})
	body := chatBody("The quick brown fox jumps over the lazy dog, again and again.", 1)
	body["cache_salt"] = "tenant-1"
	code, out := post(t, base+"/v1/chat/completions/render", body)
	require.Equal(t, http.StatusOK, code)
	rendered := decode[struct {
		TokenIDs []uint32 `json:"token_ids"`
	}](t, out).TokenIDs

	code, out = post(t, base+"/v1/chat/completions", body)
	require.Equal(t, http.StatusOK, code, string(out))
	var stored []uint32
	var hashes []uint64
	for _, ev := range rec.drain() {
		if ev.Type == simengine.BlockStored {
			stored = append(stored, ev.TokenIDs...)
			hashes = append(hashes, ev.BlockHashes...)
		}
	}
	full := len(rendered) / 4 * 4
	require.Equal(t, rendered[:full], stored, "the engine caches exactly the rendered tokens")
	parent := simengine.NoneHash
	for i := range full / 4 {
		var keys []string
		if i == 0 {
			keys = []string{"tenant-1"}
		}
		parent = simengine.HashBlock(parent, rendered[i*4:(i+1)*4], keys)
		require.Equal(t, parent.U64(), hashes[i])
	}
}

func TestBadRequests(t *testing.T) {
	_, base := startServer(t, Config{EnableScaleOut: true})
	resp, err := testClient.Post(base+"/v1/chat/completions/render", "text/plain", nil)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, "vLLM's validate_json_request")

	for _, c := range []struct {
		path string
		body any
	}{
		{"/v1/completions", map[string]any{"prompt": ""}},
		{"/v1/completions", map[string]any{"prompt": []any{1, "x"}}},
		{"/v1/completions", map[string]any{"prompt": "x", "max_tokens": 0}},
		{"/v1/completions", map[string]any{"prompt": "x", "n": 2}},
		{"/v1/completions", map[string]any{"prompt": "x", "max_tokens": 1 << 20}},
		{"/v1/chat/completions", map[string]any{"messages": []any{}}},
		{"/v1/chat/completions", map[string]any{"messages": []map[string]any{{"role": "wizard", "content": "x"}}}},
		{"/v1/chat/completions", map[string]any{"messages": []map[string]any{{"role": "user", "content": 5}}}},
		{"/v1/messages", map[string]any{"messages": []map[string]any{{"role": "user", "content": "x"}}}},
		{"/v1/responses", map[string]any{}},
		{"/v1/chat/completions/render", "not an object"},
	} {
		code, body := post(t, base+c.path, c.body)
		require.Equal(t, http.StatusBadRequest, code, "%s %v: %s", c.path, c.body, body)
		e := decode[errorBody](t, body)
		require.Equal(t, 400, e.Error.Code)
		require.NotEmpty(t, e.Error.Message)
	}
}

// A JSON answer carries its Content-Length, as vLLM's server sends it, also
// past net/http's 2 KB buffer (a long prompt's render, a long completion),
// instead of a chunked body.
func TestJSONAnswersCarryTheirLength(t *testing.T) {
	_, base := startServer(t, Config{EnableScaleOut: true})
	prompt := strings.Repeat("lorem ipsum dolor ", 400)
	for _, route := range []string{"/v1/completions/render", "/v1/completions"} {
		b, err := json.Marshal(map[string]any{"model": "m", "prompt": prompt, "max_tokens": 1})
		require.NoError(t, err)
		resp, err := testClient.Post(base+route, "application/json", bytes.NewReader(b))
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
		if route == "/v1/completions/render" {
			require.Greater(t, len(body), 2048, "past net/http's buffer")
		}
		require.Empty(t, resp.TransferEncoding, route)
		require.EqualValues(t, len(body), resp.ContentLength, route)
	}
}

// TestMessagesIgnoreCacheSalt: vLLM's Anthropic request model has no
// cache_salt (an extra key it drops) and its translation to a chat request
// sets none, so /v1/messages caches its prompt unsalted, where a chat
// request of the same conversation without a salt hits it, and
// /v1/messages/render answers cache_salt null.
func TestMessagesIgnoreCacheSalt(t *testing.T) {
	_, base := startServer(t, Config{EnableScaleOut: true})
	text := "The quick brown fox jumps over the lazy dog, again and again."
	msgs := map[string]any{"model": "m", "max_tokens": 1, "cache_salt": "tenant-1",
		"system":   "You are a simulated engine.",
		"messages": []map[string]any{{"role": "user", "content": text}}}

	code, body := post(t, base+"/v1/messages/render", msgs)
	require.Equal(t, http.StatusOK, code, string(body))
	require.Nil(t, decode[map[string]any](t, body)["cache_salt"], string(body))

	code, body = post(t, base+"/v1/messages", msgs)
	require.Equal(t, http.StatusOK, code, string(body))
	code, body = post(t, base+"/v1/chat/completions", chatBody(text, 1))
	require.Equal(t, http.StatusOK, code, string(body))
	u := decode[struct {
		Usage usage `json:"usage"`
	}](t, body).Usage
	require.Positive(t, u.PromptTokensDetails.CachedTokens, "the unsalted chat request hits the Messages request's blocks")
}

// TestEmptyCacheSaltRefused: an empty cache_salt is answered 400 on param
// cache_salt, as vLLM's request models refuse it ("Parameter 'cache_salt'
// must be a non-empty string if provided."), before the model is looked up,
// on the generation routes, their render routes and the token-in route; a
// null salt is no salt.
func TestEmptyCacheSaltRefused(t *testing.T) {
	_, base := startServer(t, Config{EnableScaleOut: true})
	for _, c := range []struct {
		path string
		body map[string]any
	}{
		{"/v1/completions", map[string]any{"model": "nope", "prompt": "hi", "max_tokens": 1}},
		{"/v1/completions", map[string]any{"model": "nope", "prompt": []int{5, 6}, "max_tokens": 1}},
		{"/v1/completions/render", map[string]any{"model": "nope", "prompt": "hi"}},
		{"/v1/chat/completions", chatBody("hi", 1)},
		{"/v1/chat/completions/render", chatBody("hi", 1)},
		{"/v1/responses", map[string]any{"model": "nope", "input": "hi", "max_output_tokens": 1}},
		{"/v1/responses/render", map[string]any{"model": "nope", "input": "hi"}},
		{GeneratePath, map[string]any{"model": "nope", "token_ids": []int{5, 6}, "sampling_params": map[string]any{"max_tokens": 1}}},
	} {
		c.body["model"] = "nope"
		c.body["cache_salt"] = ""
		code, body := post(t, base+c.path, c.body)
		require.Equal(t, http.StatusBadRequest, code, "%s: %s", c.path, body)
		e := decode[errorBody](t, body)
		require.Equal(t, "Parameter 'cache_salt' must be a non-empty string if provided.", e.Error.Message, c.path)
		require.NotNil(t, e.Error.Param, c.path)
		require.Equal(t, "cache_salt", *e.Error.Param, c.path)

		c.body["model"], c.body["cache_salt"] = "m", nil
		code, body = post(t, base+c.path, c.body)
		require.Equal(t, http.StatusOK, code, "%s: %s", c.path, body)
	}
}

// TestCacheSaltRefusedLikeVLLM: a cache_salt vLLM's validate_cache_salt
// refuses is answered 400 on param cache_salt with its message, before
// the model is looked up: one longer than 128 characters (Python's,
// code points) or holding '@', '/', '\' or NUL, and one that is not a
// string; 128 characters of any width pass. /v1/messages has no
// cache_salt (vLLM drops the key), so any value passes there.
func TestCacheSaltRefusedLikeVLLM(t *testing.T) {
	_, base := startServer(t, Config{EnableScaleOut: true})
	const (
		lenMsg  = `Parameter 'cache_salt' must be at most 128 characters and must not contain '@', '/', '\\', or NUL.`
		typeMsg = "Parameter 'cache_salt' must be a non-empty string if provided."
	)
	routes := []struct {
		path string
		body func() map[string]any
	}{
		{"/v1/completions", func() map[string]any { return map[string]any{"prompt": "hi", "max_tokens": 1} }},
		{"/v1/completions", func() map[string]any { return map[string]any{"prompt": []int{5, 6}, "max_tokens": 1} }},
		{"/v1/completions/render", func() map[string]any { return map[string]any{"prompt": "hi"} }},
		{"/v1/chat/completions", func() map[string]any { return chatBody("hi", 1) }},
		{"/v1/chat/completions/render", func() map[string]any { return chatBody("hi", 1) }},
		{"/v1/responses", func() map[string]any { return map[string]any{"input": "hi", "max_output_tokens": 1} }},
		{"/v1/responses/render", func() map[string]any { return map[string]any{"input": "hi"} }},
		{GeneratePath, func() map[string]any {
			return map[string]any{"token_ids": []int{5, 6}, "sampling_params": map[string]any{"max_tokens": 1}}
		}},
	}
	bad := []struct {
		salt any
		msg  string
	}{
		{strings.Repeat("a", 129), lenMsg},
		{strings.Repeat("é", 129), lenMsg},
		{"tenant@1", lenMsg},
		{"tenant/1", lenMsg},
		{`tenant\1`, lenMsg},
		{"tenant\x001", lenMsg},
		{5, typeMsg},
		{true, typeMsg},
		{[]string{"a"}, typeMsg},
		{map[string]any{}, typeMsg},
	}
	for _, rt := range routes {
		for _, c := range bad {
			b := rt.body()
			b["model"], b["cache_salt"] = "nope", c.salt
			code, body := post(t, base+rt.path, b)
			require.Equal(t, http.StatusBadRequest, code, "%s %q: %s", rt.path, c.salt, body)
			e := decode[errorBody](t, body)
			require.Equal(t, c.msg, e.Error.Message, "%s %q", rt.path, c.salt)
			require.NotNil(t, e.Error.Param, rt.path)
			require.Equal(t, "cache_salt", *e.Error.Param, rt.path)
		}
		for _, salt := range []string{strings.Repeat("a", 128), strings.Repeat("é", 128), "tenant-1:x.y_z+=="} {
			b := rt.body()
			b["model"], b["cache_salt"] = "m", salt
			code, body := post(t, base+rt.path, b)
			require.Equal(t, http.StatusOK, code, "%s %q: %s", rt.path, salt, body)
		}
	}
	for _, c := range bad {
		code, body := post(t, base+"/v1/messages", map[string]any{"model": "m", "max_tokens": 1, "cache_salt": c.salt,
			"messages": []map[string]any{{"role": "user", "content": "hi"}}})
		require.Equal(t, http.StatusOK, code, "%q: %s", c.salt, body)
	}
}

// TestRenderEchoesPriorityAndStreamOptions: vLLM's completions and chat
// render copy the request's priority into each GenerateRequest, and its
// stream_options when the request streams (null otherwise), so that a
// router sending the rendered request on to the token-in route keeps
// them. The simulated engine's render answered 0 and null whatever the
// request said.
func TestRenderEchoesPriorityAndStreamOptions(t *testing.T) {
	_, base := startServer(t, Config{EnableScaleOut: true})
	type gen struct {
		Priority      int64           `json:"priority"`
		Stream        bool            `json:"stream"`
		StreamOptions json.RawMessage `json:"stream_options"`
	}
	opts := map[string]any{"include_usage": true}
	for _, c := range []struct {
		path  string
		body  map[string]any
		array bool
	}{
		{"/v1/completions/render", map[string]any{"model": "m", "prompt": "hello", "priority": 3, "stream": true, "stream_options": opts}, true},
		{"/v1/chat/completions/render", map[string]any{"model": "m", "messages": []any{map[string]any{"role": "user", "content": "hi"}},
			"priority": -2, "stream": true, "stream_options": opts}, false},
	} {
		code, body := post(t, base+c.path, c.body)
		require.Equal(t, http.StatusOK, code, string(body))
		var g gen
		if c.array {
			g = decode[[]gen](t, body)[0]
		} else {
			g = decode[gen](t, body)
		}
		require.Equal(t, int64(c.body["priority"].(int)), g.Priority, string(body))
		require.True(t, g.Stream)
		require.JSONEq(t, `{"include_usage":true,"continuous_usage_stats":false}`, string(g.StreamOptions), string(body))

		delete(c.body, "stream")
		delete(c.body, "stream_options")
		c.body["priority"] = 1.0 // an integer as vLLM reads one
		code, body = post(t, base+c.path, c.body)
		require.Equal(t, http.StatusOK, code, string(body))
		if c.array {
			g = decode[[]gen](t, body)[0]
		} else {
			g = decode[gen](t, body)
		}
		require.Equal(t, int64(1), g.Priority, string(body))
		require.Equal(t, "null", string(g.StreamOptions), "no stream options without a stream: %s", body)
	}
}
