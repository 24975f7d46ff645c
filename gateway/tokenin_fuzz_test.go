package gateway

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/render"
)

// FuzzTokenBody feeds arbitrary completions bodies (those the gateway
// accepts, bodyModel) to the tokenize-once rewrite (seed corpus in
// testdata/fuzz/FuzzTokenBody), with as many rendered prompts as the body's
// text prompt holds: it never panics; a body it rewrites is valid JSON whose
// every top-level field but "prompt" reads as it came (Python's json, like
// encoding/json, keeps the last of a repeated key), whose prompt was text
// and is now the token IDs, and which has no echo or prompt_embeds; a body
// whose last prompt is text and that has neither field is always rewritten;
// and writing into a recycled array gives the same bytes.
func FuzzTokenBody(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","prompt":"hi there","max_tokens":2}`,
		`{"prompt" : [ "a" , "b" ] }`,
		`{"pr\u006fmpt":"x","echo":false}`,
		`{"prompt":"x","prompt":"y"}`,
		`{"prompt":["x"],"prompt":[1]}`,
		`{"prompt":"x","\u0065cho":true}`,
		`{"prompt":"x","prompt_embeds":null,"stream":true}`,
		`{"prompt":["a",1]}`,
		`{"prompt":[]}`,
	} {
		f.Add([]byte(s), []byte{1, 2, 3})
	}
	f.Fuzz(func(t *testing.T, body, ids []byte) {
		if _, err := bodyModel(body); err != nil {
			return // refused before the rewrite
		}
		_, _, _, n, _ := completionsPrompt(body)
		prompts := make([]render.Prompt, n)
		for i := range prompts {
			prompts[i].TokenIDs = []uint32{uint32(i) * 65537}
			for _, b := range ids {
				prompts[i].TokenIDs = append(prompts[i].TokenIDs, uint32(b)<<(8*(i%4)))
			}
		}
		var in map[string]json.RawMessage
		require.NoError(t, json.Unmarshal(body, &in), "bodyModel accepted %q", body)
		var text string
		var texts []string
		textPrompt := json.Unmarshal(in["prompt"], &text) == nil || (json.Unmarshal(in["prompt"], &texts) == nil && len(texts) > 0)
		_, echo := in["echo"]
		_, embeds := in["prompt_embeds"]

		out, ok := tokenBody(body, prompts)
		if !ok {
			if textPrompt && !echo && !embeds {
				t.Fatalf("left the text prompt of %q alone", body)
			}
			return
		}
		require.True(t, textPrompt, "rewrote %q, whose prompt is not text", body)
		for _, k := range []string{"echo", "prompt_embeds"} {
			if v, has := in[k]; has && string(v) != "false" && string(v) != "null" {
				t.Fatalf("rewrote %q, which has %s %s", body, k, v)
			}
		}
		var got map[string]json.RawMessage
		require.NoError(t, json.Unmarshal(out, &got), "tokenBody(%q) = %q", body, out)
		require.Equal(t, len(in), len(got))
		for k, v := range in {
			if k != "prompt" {
				require.Equal(t, string(v), string(got[k]), "field %q of %q", k, body)
			}
		}
		var one []uint32
		var list [][]uint32
		switch {
		case json.Unmarshal(got["prompt"], &one) == nil:
			require.Len(t, prompts, 1)
			require.Equal(t, prompts[0].TokenIDs, one)
			require.NoError(t, json.Unmarshal(in["prompt"], &text), "a list prompt written as one")
		case json.Unmarshal(got["prompt"], &list) == nil:
			require.Len(t, list, len(prompts))
			for i := range list {
				require.Equal(t, prompts[i].TokenIDs, list[i])
			}
		default:
			t.Fatalf("tokenBody(%q) = %q: prompt is not token IDs", body, out)
		}
		recycled, ok := appendTokenBody(bytes.Repeat([]byte{'#'}, len(out)+7)[:0], body, prompts)
		require.True(t, ok)
		require.Equal(t, string(out), string(recycled))
	})
}
