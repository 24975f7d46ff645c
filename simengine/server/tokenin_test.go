package server

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"unicode/utf16"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/simengine"
)

// TestTokenizationsCountTextPromptsOnly: text prompts count once per prompt
// on every route (render included); token-ID prompts and the token-in
// generate route count nothing.
func TestTokenizationsCountTextPromptsOnly(t *testing.T) {
	s, base := startServer(t, Config{EnableScaleOut: true})
	require.Zero(t, s.Tokenizations())

	code, body := post(t, base+"/v1/completions", map[string]any{"model": "m", "prompt": "hello there", "max_tokens": 1})
	require.Equal(t, http.StatusOK, code, string(body))
	require.EqualValues(t, 1, s.Tokenizations())

	code, body = post(t, base+"/v1/completions/render", map[string]any{"model": "m", "prompt": []string{"a b", "c d"}})
	require.Equal(t, http.StatusOK, code, string(body))
	rendered := decode[[]generateRequest](t, body)
	require.Len(t, rendered, 2)
	require.EqualValues(t, 3, s.Tokenizations())

	code, body = post(t, base+"/v1/completions", map[string]any{"model": "m", "prompt": rendered[0].TokenIDs, "max_tokens": 1})
	require.Equal(t, http.StatusOK, code, string(body))
	require.EqualValues(t, 3, s.Tokenizations(), "a token-ID prompt is not tokenized")

	code, body = post(t, base+"/v1/chat/completions", chatBody("hi", 1))
	require.Equal(t, http.StatusOK, code, string(body))
	code, body = post(t, base+"/v1/chat/completions/render", chatBody("hi", 1))
	require.Equal(t, http.StatusOK, code, string(body))
	require.EqualValues(t, 5, s.Tokenizations())

	code, body = post(t, base+GeneratePath, map[string]any{"model": "m", "token_ids": rendered[1].TokenIDs,
		"sampling_params": map[string]any{"max_tokens": 3}})
	require.Equal(t, http.StatusOK, code, string(body))
	require.EqualValues(t, 5, s.Tokenizations(), "the token-in route tokenizes nothing")

	_, metrics := get(t, base+"/metrics")
	require.Contains(t, string(metrics), `simengine_tokenizations_total{route="/v1/completions"} 1`)
	require.Contains(t, string(metrics), `simengine_tokenizations_total{route="render"} 1`)
}

// TestGenerateAnswersLikeVLLM: the token-in route answers vLLM's
// GenerateResponse (token IDs out, usage with the prompt's length), streams
// GenerateStreamResponse chunks, runs LoRA adapters named by model, and
// rejects what vLLM rejects; it is absent without EnableScaleOut.
func TestGenerateAnswersLikeVLLM(t *testing.T) {
	_, base := startServer(t, Config{EnableScaleOut: true, LoRAModules: []string{"ad"}})
	prompt := []uint32{5, 6, 7, 8, 9}
	code, body := post(t, base+GeneratePath, map[string]any{"request_id": "r1", "model": "ad", "token_ids": prompt,
		"sampling_params": map[string]any{"max_tokens": 3}, "cache_salt": "s"})
	require.Equal(t, http.StatusOK, code, string(body))
	type resp struct {
		RequestID string `json:"request_id"`
		Model     string `json:"model"`
		Choices   []struct {
			Index        int      `json:"index"`
			FinishReason string   `json:"finish_reason"`
			TokenIDs     []uint32 `json:"token_ids"`
		} `json:"choices"`
		Usage usage `json:"usage"`
	}
	r := decode[resp](t, body)
	require.Equal(t, "generate-tokens-r1", r.RequestID)
	require.Equal(t, "ad", r.Model)
	require.Len(t, r.Choices, 1)
	require.Len(t, r.Choices[0].TokenIDs, 3)
	require.Equal(t, "length", r.Choices[0].FinishReason)
	require.Equal(t, 5, r.Usage.PromptTokens)
	require.Equal(t, 3, r.Usage.CompletionTokens)

	evs := readSSE(t, base+GeneratePath, map[string]any{"token_ids": prompt, "stream": true,
		"stream_options": map[string]any{"include_usage": true}, "sampling_params": map[string]any{"max_tokens": 2}})
	require.Len(t, evs, 4, "two token chunks, the usage chunk and [DONE]")
	require.Contains(t, evs[0].data, `"token_ids":[`)
	require.Contains(t, evs[1].data, `"finish_reason":"length"`)
	require.Contains(t, evs[2].data, `"prompt_tokens":5`)
	require.Equal(t, "[DONE]", evs[3].data)

	code, body = post(t, base+GeneratePath, map[string]any{"token_ids": prompt})
	require.Equal(t, http.StatusBadRequest, code, string(body))
	code, body = post(t, base+GeneratePath, map[string]any{"token_ids": []uint32{}, "sampling_params": map[string]any{}})
	require.Equal(t, http.StatusBadRequest, code, string(body))
	code, body = post(t, base+GeneratePath, map[string]any{"model": "other", "token_ids": prompt, "sampling_params": map[string]any{}})
	require.Equal(t, http.StatusNotFound, code, string(body))

	// Features are admitted by vLLM's rules; the simulated engine has no
	// multimodal inputs and serves what vLLM admits as its tokens.
	place := func(off, n int) map[string]any { return map[string]any{"offset": off, "length": n} }
	for _, c := range []struct {
		features map[string]any
		status   int
	}{
		{map[string]any{"mm_hashes": map[string]any{"image": []string{"a", "b"}}, "mm_placeholders": map[string]any{"image": []any{place(3, 2), place(0, 3)}}}, http.StatusOK},
		{map[string]any{"mm_hashes": map[string]any{"image": []string{"a"}}, "mm_placeholders": map[string]any{"image": []any{place(0, 1)}, "audio": []any{place(2, 1)}}}, http.StatusBadRequest},
		{map[string]any{"mm_hashes": map[string]any{"image": []string{"a"}, "audio": []string{"b"}}, "mm_placeholders": map[string]any{"image": []any{place(0, 1)}}}, http.StatusBadRequest},
		{map[string]any{"mm_hashes": map[string]any{"image": []string{"a", "b"}}, "mm_placeholders": map[string]any{"image": []any{place(0, 1)}}}, http.StatusBadRequest},
		{map[string]any{"mm_hashes": map[string]any{"image": []string{"a", "b"}}, "mm_placeholders": map[string]any{"image": []any{place(0, 3), place(2, 1)}}}, http.StatusBadRequest},
		{map[string]any{"mm_hashes": map[string]any{"image": []string{"a"}}, "mm_placeholders": map[string]any{"image": []any{place(4, 2)}}}, http.StatusBadRequest},
	} {
		code, body = post(t, base+GeneratePath, map[string]any{"token_ids": prompt, "sampling_params": map[string]any{"max_tokens": 1}, "features": c.features})
		require.Equal(t, c.status, code, "%v: %s", c.features, body)
		if c.status == http.StatusBadRequest {
			require.Contains(t, string(body), `"param":"features"`)
		}
	}

	_, plain := startServer(t, Config{})
	code, body = post(t, plain+GeneratePath, map[string]any{"token_ids": prompt, "sampling_params": map[string]any{}})
	require.Equal(t, http.StatusNotFound, code)
	require.JSONEq(t, `{"detail":"Not Found"}`, string(body))
}

// TestGenerateContentPartsAsATextOnlyVLLM: vLLM's GenerateRequest may give
// its multimodal items as raw media in content_parts (a list of objects or
// null, refused beside features), which vLLM fetches and resolves; the
// simulated engine has no multimodal model, so it answers a media part
// (image_url, audio_url, video_url) as vLLM answers one for a text-only
// model, 400 "This model does not support multi-modal inputs", instead of
// serving the prompt as if the media were not there. A list without media
// parts adds nothing to the prompt and is served; a malformed one, or one
// beside features, is answered 400 as vLLM's request model refuses it.
func TestGenerateContentPartsAsATextOnlyVLLM(t *testing.T) {
	_, base := startServer(t, Config{EnableScaleOut: true})
	features := `{"mm_hashes":{"image":["a"]},"mm_placeholders":{"image":[{"offset":0,"length":2}]}}`
	for _, c := range []struct {
		parts, features string
		status          int
		msg             string
	}{
		{parts: `[{"type":"image_url","image_url":{"url":"https://x/a.png"}}]`, status: http.StatusBadRequest, msg: "This model does not support multi-modal inputs"},
		{parts: `[{"type":"text","text":"x"},{"type":"audio_url","audio_url":{"url":"https://x/a.wav"}}]`, status: http.StatusBadRequest, msg: "This model does not support multi-modal inputs"},
		{parts: `[{"type":"video_url","uuid":"v1"}]`, status: http.StatusBadRequest, msg: "This model does not support multi-modal inputs"},
		{parts: `[{"type":"text","type":"image_url"}]`, status: http.StatusBadRequest, msg: "This model does not support multi-modal inputs"},
		{parts: `[{"type":"image_url","type":"text"}]`, status: http.StatusOK},
		{parts: `[{"type":"text","text":"x"},{"Type":"image_url"},{}]`, status: http.StatusOK},
		{parts: `[]`, status: http.StatusOK},
		{parts: `null`, status: http.StatusOK},
		{parts: `[]`, features: features, status: http.StatusOK},
		{parts: `[{"type":"text"}]`, features: features, status: http.StatusBadRequest, msg: "content_parts and features are mutually exclusive"},
		{parts: `{"type":"image_url"}`, status: http.StatusBadRequest, msg: "content_parts"},
		{parts: `["image_url"]`, status: http.StatusBadRequest, msg: "content_parts"},
		{parts: `[null]`, status: http.StatusBadRequest, msg: "content_parts"},
	} {
		body := `{"model":"m","token_ids":[1,2,3,4],"sampling_params":{"max_tokens":1},"content_parts":` + c.parts
		if c.features != "" {
			body += `,"features":` + c.features
		}
		requireGenerateAnswer(t, base, body+"}", c.status, c.msg)
	}
}

func TestParseTokenListAgreesWithEncodingJSON(t *testing.T) {
	for _, in := range []string{`[1,2,3]`, ` [ 0 , 4294967295 ] `, `[4294967296]`, `[]`, `[1,]`, `[01]`, `[1.5]`, `[-1]`,
		`["a"]`, `[[1]]`, `[1] x`, `[1e3]`, `"s"`} {
		var got []uint32
		ok := parseTokenList([]byte(in), &got)
		var want []uint32
		err := json.Unmarshal([]byte(in), &want)
		if ok {
			require.NoError(t, err, in)
			require.Equal(t, want, got, in)
		} else if err == nil && len(want) > 0 && in != `[1e3]` {
			t.Errorf("%s: refused a list encoding/json reads as %v", in, want)
		}
	}
}

// TestTokenIDPromptsOutOfVocabularyRefused: a prompt given as token IDs with
// an ID past the tokenizer's vocabulary is answered 400, as vLLM's input
// processor answers it ("Token id N is out of vocabulary"), on the token-in
// generate route and on completions; the vocabulary's last ID is served.
func TestTokenIDPromptsOutOfVocabularyRefused(t *testing.T) {
	_, base := startServer(t, Config{EnableScaleOut: true})
	last := uint32(simengine.TokenOffset + simengine.VocabSize - 1)
	for _, c := range []struct {
		path string
		body map[string]any
	}{
		{GeneratePath, map[string]any{"token_ids": []uint32{5, last + 1, 6}, "sampling_params": map[string]any{"max_tokens": 1}}},
		{GeneratePath, map[string]any{"token_ids": []uint32{5, 4294967295}, "sampling_params": map[string]any{"max_tokens": 1}}},
		{"/v1/completions", map[string]any{"model": "m", "prompt": []uint32{last + 1}, "max_tokens": 1}},
		{"/v1/completions", map[string]any{"model": "m", "prompt": [][]uint32{{5}, {6, last + 1}}, "max_tokens": 1}},
	} {
		code, body := post(t, base+c.path, c.body)
		require.Equal(t, http.StatusBadRequest, code, "%s %v: %s", c.path, c.body, body)
		require.Contains(t, string(body), "is out of vocabulary", "%s %v", c.path, c.body)
	}
	code, body := post(t, base+GeneratePath, map[string]any{"token_ids": []uint32{5, last}, "sampling_params": map[string]any{"max_tokens": 1}})
	require.Equal(t, http.StatusOK, code, string(body))
	code, body = post(t, base+"/v1/completions", map[string]any{"model": "m", "prompt": []uint32{last}, "max_tokens": 1})
	require.Equal(t, http.StatusOK, code, string(body))
}

// TestTokenIDsReadAsVLLMReadsThem: a prompt's token IDs are read as vLLM's
// request models read a list[int] (pydantic's lax mode): an integral float,
// a string of an integer and a boolean are IDs, on the token-in generate
// route and in a completions prompt; a null ID or a fraction is refused, as
// vLLM refuses it.
func TestTokenIDsReadAsVLLMReadsThem(t *testing.T) {
	_, base := startServer(t, Config{EnableScaleOut: true})
	for _, c := range []struct {
		path, body string
		status     int
		prompt     int
	}{
		{GeneratePath, `{"token_ids":[1000.0,1001,"1002",true],"sampling_params":{"max_tokens":1}}`, http.StatusOK, 4},
		{GeneratePath, `{"token_ids":[1000,null],"sampling_params":{"max_tokens":1}}`, http.StatusBadRequest, 0},
		{GeneratePath, `{"token_ids":[1000,1.5],"sampling_params":{"max_tokens":1}}`, http.StatusBadRequest, 0},
		{"/v1/completions", `{"model":"m","prompt":[1000.0,1001,"1002"],"max_tokens":1}`, http.StatusOK, 3},
		{"/v1/completions", `{"model":"m","prompt":[[1000.0,1001],["1002"]],"max_tokens":1}`, http.StatusOK, 3},
		{"/v1/completions", `{"model":"m","prompt":[1000,null],"max_tokens":1}`, http.StatusBadRequest, 0},
		{"/v1/completions", `{"model":"m","prompt":[[1000],[null]],"max_tokens":1}`, http.StatusBadRequest, 0},
		{"/v1/completions", `{"model":"m","prompt":[1000,1.5],"max_tokens":1}`, http.StatusBadRequest, 0},
	} {
		code, body := post(t, base+c.path, json.RawMessage(c.body))
		require.Equal(t, c.status, code, "%s %s: %s", c.path, c.body, body)
		if c.status == http.StatusOK {
			var r struct{ Usage usage }
			require.NoError(t, json.Unmarshal(body, &r))
			require.Equal(t, c.prompt, r.Usage.PromptTokens, "%s %s", c.path, c.body)
		}
	}
}

// TestRequestMembersReadByExactName: a request's members are read as vLLM's
// request models read them, by their exact names with the last of a
// repeated one winning, as the gateway and the render client read them: a
// "Cache_Salt", "Token_IDs" or "Prompt" vLLM ignores does not salt, prompt
// or replace anything here either.
func TestRequestMembersReadByExactName(t *testing.T) {
	_, base := startServer(t, Config{EnableScaleOut: true})
	ids := `[1000,1001,1002,1003,1004,1005,1006,1007,1008]`
	cached := func(body []byte) int {
		var r struct{ Usage usage }
		require.NoError(t, json.Unmarshal(body, &r), string(body))
		return r.Usage.PromptTokensDetails.CachedTokens
	}

	code, body := post(t, base+GeneratePath, json.RawMessage(`{"token_ids":`+ids+`,"sampling_params":{"max_tokens":1},"Cache_Salt":"x"}`))
	require.Equal(t, http.StatusOK, code, string(body))
	code, body = post(t, base+GeneratePath, json.RawMessage(`{"token_ids":`+ids+`,"sampling_params":{"max_tokens":1}}`))
	require.Equal(t, http.StatusOK, code, string(body))
	require.Equal(t, 8, cached(body), "Cache_Salt is no salt: the unsalted repeat hits both blocks")

	code, body = post(t, base+GeneratePath, json.RawMessage(`{"Token_IDs":`+ids+`,"sampling_params":{"max_tokens":1}}`))
	require.Equal(t, http.StatusBadRequest, code, "Token_IDs is not token_ids: %s", body)

	code, body = post(t, base+"/v1/completions", json.RawMessage(`{"model":"m","prompt":[1000,1001,1002],"Prompt":[5],"max_tokens":1}`))
	require.Equal(t, http.StatusOK, code, string(body))
	var r struct{ Usage usage }
	require.NoError(t, json.Unmarshal(body, &r))
	require.Equal(t, 3, r.Usage.PromptTokens, "the prompt is prompt, not Prompt")

	b := chatBody("hi", 1)
	b["Cache_Salt"] = "x"
	code, body = post(t, base+"/v1/chat/completions/render", b)
	require.Equal(t, http.StatusOK, code, string(body))
	require.Contains(t, string(body), `"cache_salt":null`)
}

// TestBodiesInEveryEncodingVLLMReads: vLLM reads a request body with
// FastAPI's request.json(), Python's json.loads on the body's bytes, which
// reads a UTF-8 body past a leading byte order mark and detects and decodes
// a UTF-16 or UTF-32 one; the simulated engine serves each such body as
// vLLM does (it answered them 400), and refuses one that is not text in its
// encoding.
func TestBodiesInEveryEncodingVLLMReads(t *testing.T) {
	_, base := startServer(t, Config{EnableScaleOut: true})
	const body = `{"model":"m","prompt":"héllo 😀","max_tokens":1}`
	le16 := func(s string) string {
		var out []byte
		for _, u := range utf16.Encode([]rune(s)) {
			out = append(out, byte(u), byte(u>>8))
		}
		return string(out)
	}
	be32 := func(s string) string {
		var out []byte
		for _, r := range s {
			out = append(out, byte(r>>24), byte(r>>16), byte(r>>8), byte(r))
		}
		return string(out)
	}
	for name, b := range map[string]string{
		"UTF-8 with a mark": "\xef\xbb\xbf" + body,
		"UTF-16LE":          le16(body),
		"UTF-16LE, marked":  "\xff\xfe" + le16(body),
		"UTF-32BE":          be32(body),
		"UTF-32BE, marked":  "\x00\x00\xfe\xff" + be32(body),
	} {
		for _, path := range []string{"/v1/completions", "/v1/completions/render"} {
			resp, err := testClient.Post(base+path, "application/json", strings.NewReader(b))
			require.NoError(t, err)
			got, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			require.NoError(t, err)
			require.Equal(t, http.StatusOK, resp.StatusCode, "%s %s: %s", name, path, got)
		}
	}
	resp, err := testClient.Post(base+"/v1/completions", "application/json", strings.NewReader(le16(`{"prompt":"`)+"\x00\xd8"+le16(`"}`)))
	require.NoError(t, err)
	got, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, string(got))
	require.Contains(t, string(got), "UTF-16LE")
}

// TestGenerateMetadataOnlyItemsAsVLLM: vLLM's GenerateRequest refuses, 400
// BadRequestError, a multimodal item given by its mm_metadata alone (no
// kwargs_data entry) unless ec_transfer_params is a non-empty object or
// the features' requires_kv is true; and an ec_transfer_params that is
// not an object or null. The simulated engine answers each as vLLM does
// rather than serving what vLLM refuses.
func TestGenerateMetadataOnlyItemsAsVLLM(t *testing.T) {
	_, base := startServer(t, Config{EnableScaleOut: true})
	const places = `"mm_hashes":{"image":["a"]},"mm_placeholders":{"image":[{"offset":0,"length":2}]}`
	for _, c := range []struct {
		features, ec string
		status       int
		msg          string
	}{
		{features: `"mm_metadata":{"image":["m"]}`, status: http.StatusBadRequest, msg: "metadata-only multimodal items require ec_transfer_params"},
		{features: `"kwargs_data":{"image":[null]},"mm_metadata":{"image":["m"]}`, ec: `{}`, status: http.StatusBadRequest, msg: "metadata-only multimodal items require ec_transfer_params"},
		{features: `"mm_metadata":{"image":["m"]}`, ec: `"x"`, status: http.StatusBadRequest, msg: "ec_transfer_params"},
		{features: `"mm_metadata":{"image":["m"]}`, ec: `{"engine_id":"e"}`, status: http.StatusOK},
		{features: `"mm_metadata":{"image":["m"]},"requires_kv":true,"kv_handoff":{"version":1,"model_fingerprint":"f","position_state":"sequence"}`, status: http.StatusOK},
		{features: `"kwargs_data":{"image":["k"]},"mm_metadata":{"image":["m"]}`, status: http.StatusOK},
		{features: `"mm_metadata":{"image":[null]}`, status: http.StatusOK},
	} {
		body := `{"model":"m","token_ids":[1,2,3,4],"sampling_params":{"max_tokens":1},"features":{` + places + `,` + c.features + `}`
		if c.ec != "" {
			body += `,"ec_transfer_params":` + c.ec
		}
		requireGenerateAnswer(t, base, body+"}", c.status, c.msg)
	}
}

// TestGenerateOutputModesAsVLLM: the token-in route takes output_mode
// "tokens" (the default, the mode vLLM's answers name) or "text" (vLLM's
// RFC #56851), which adds each choice's detokenized text to its token IDs,
// whole or as each stream chunk's delta; both answers name their mode. Any
// other value, null included, and "text" with sampling_params.detokenize
// false, are answered 400 BadRequestError.
func TestGenerateOutputModesAsVLLM(t *testing.T) {
	_, base := startServer(t, Config{EnableScaleOut: true})
	prompt := []uint32{5, 6, 7, 8, 9}
	type answer struct {
		OutputMode string `json:"output_mode"`
		Choices    []struct {
			TokenIDs []uint32 `json:"token_ids"`
			Text     *string  `json:"text"`
		} `json:"choices"`
	}
	for _, c := range []struct {
		mode any
		text bool
	}{{nil, false}, {"tokens", false}, {"text", true}} {
		req := map[string]any{"token_ids": prompt, "sampling_params": map[string]any{"max_tokens": 3}}
		want := "tokens"
		if c.mode != nil {
			req["output_mode"], want = c.mode, c.mode.(string)
		}
		code, body := post(t, base+GeneratePath, req)
		require.Equal(t, http.StatusOK, code, string(body))
		a := decode[answer](t, body)
		require.Equal(t, want, a.OutputMode, string(body))
		require.Len(t, a.Choices, 1)
		require.Len(t, a.Choices[0].TokenIDs, 3)
		if !c.text {
			require.Nil(t, a.Choices[0].Text, "no text in tokens mode: %s", body)
			continue
		}
		require.NotNil(t, a.Choices[0].Text, string(body))
		require.Equal(t, simengine.Detokenize(a.Choices[0].TokenIDs), *a.Choices[0].Text)

		req["stream"] = true
		evs := readSSE(t, base+GeneratePath, req)
		require.Len(t, evs, 4, "three token chunks and [DONE]")
		var text string
		for _, ev := range evs[:3] {
			ch := decode[answer](t, []byte(ev.data))
			require.Equal(t, "text", ch.OutputMode, ev.data)
			require.NotNil(t, ch.Choices[0].Text, ev.data)
			text += *ch.Choices[0].Text
		}
		require.Equal(t, *a.Choices[0].Text, text, "the deltas add up to the whole text")
	}

	for _, c := range []struct {
		body, msg string
	}{
		{`"output_mode":"json"`, "Input should be 'tokens' or 'text'"},
		{`"output_mode":null`, "Input should be 'tokens' or 'text'"},
		{`"output_mode":1`, "Input should be 'tokens' or 'text'"},
		{`"output_mode":"Text"`, "Input should be 'tokens' or 'text'"},
		{`"output_mode":"text","sampling_params":{"detokenize":false}`, "output_mode='text' requires sampling_params.detokenize to be true"},
	} {
		body := `{"token_ids":[1,2,3],` + c.body
		if !strings.Contains(c.body, "sampling_params") {
			body += `,"sampling_params":{}`
		}
		requireGenerateAnswer(t, base, body+"}", http.StatusBadRequest, c.msg)
	}
}

// TestGenerateDecoderKVFeaturesAsVLLM: features whose items come as
// decoder KV (requires_kv true) are admitted by vLLM only with a
// well-formed kv_handoff, non-empty hashes and no serialized tensors; the
// simulated engine answers the rest 400 BadRequestError, as vLLM does,
// and serves the admitted ones.
func TestGenerateDecoderKVFeaturesAsVLLM(t *testing.T) {
	_, base := startServer(t, Config{EnableScaleOut: true})
	const (
		places  = `"mm_hashes":{"image":["a"]},"mm_placeholders":{"image":[{"offset":0,"length":2}]}`
		handoff = `"kv_handoff":{"version":1,"model_fingerprint":"model-a","position_state":"sequence"}`
	)
	for _, c := range []struct {
		features string
		status   int
		msg      string
	}{
		{`,"requires_kv":true`, http.StatusBadRequest, "requires_kv requires kv_handoff"},
		{`,"requires_kv":true,"kwargs_data":{"image":["k"]},` + handoff, http.StatusBadRequest, "requires_kv does not accept full kwargs_data"},
		{`,"requires_kv":null`, http.StatusBadRequest, "requires_kv"},
		{`,"kv_handoff":{"version":1,"model_fingerprint":"m","position_state":"mrope"}`, http.StatusBadRequest, "position_state"},
		{`,"requires_kv":true,"mm_metadata":{"image":["m"]},` + handoff, http.StatusOK, ""},
	} {
		body := `{"model":"m","token_ids":[1,2,3,4],"sampling_params":{"max_tokens":1},"features":{` + places + c.features + `}}`
		resp, err := testClient.Post(base+GeneratePath, "application/json", strings.NewReader(body))
		require.NoError(t, err)
		got, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		require.Equal(t, c.status, resp.StatusCode, "%s: %s", body, got)
		if c.status != http.StatusOK {
			var e errorBody
			require.NoError(t, json.Unmarshal(got, &e), string(got))
			require.Equal(t, "BadRequestError", e.Error.Type)
			require.Contains(t, e.Error.Message, c.msg)
		}
	}
}

// requireGenerateAnswer posts body, raw JSON, to the token-in route and
// checks the answer's status; an answer other than 200 must be vLLM's 400
// BadRequestError whose message contains msg.
func requireGenerateAnswer(t *testing.T, base, body string, status int, msg string) {
	t.Helper()
	resp, err := testClient.Post(base+GeneratePath, "application/json", strings.NewReader(body))
	require.NoError(t, err)
	got, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Equal(t, status, resp.StatusCode, "%s: %s", body, got)
	if status == http.StatusOK {
		return
	}
	var e errorBody
	require.NoError(t, json.Unmarshal(got, &e), string(got))
	require.Equal(t, "BadRequestError", e.Error.Type)
	require.Equal(t, http.StatusBadRequest, e.Error.Code)
	require.Contains(t, e.Error.Message, msg)
}
