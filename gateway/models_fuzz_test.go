package gateway

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// FuzzSetBodyModel feeds arbitrary client bodies the gateway accepts
// (bodyModel) to the alias and canary rewrite of their model (seed corpus
// in testdata/fuzz/FuzzSetBodyModel): it never fails on them; the body it
// writes is a JSON object whose model is the target and whose every other
// field is the client's value (Python's json, like encoding/json, keeps the
// last of a repeated key); and rewriting that body again changes nothing.
func FuzzSetBodyModel(f *testing.F) {
	f.Add([]byte(`{"model":"alias","prompt":"hi","max_tokens":2}`), "meta-llama/Llama-3.1-8B")
	f.Add([]byte(`{ "prompt" : [1, 2] , "model" : null , "x": {"y": [1e400, "<&>"]} }`), "m")
	f.Add([]byte(`{"mod\u0065l":"a","model":"b","\u2028":"\ud800"}`), "<script>")
	f.Add([]byte("{\"a\":\"\xff\",\"\xfe\":1}"), "\xff")
	f.Fuzz(func(t *testing.T, body []byte, model string) {
		if _, err := bodyModel(body); err != nil {
			return
		}
		out, err := setBodyModel(body, model)
		require.NoError(t, err, "body %q", body)
		got, err := bodyModel(out)
		require.NoError(t, err, "rewrote %q as %q", body, out)
		var want string
		_ = json.Unmarshal(mustMarshal(t, model), &want) // model as it reads back (invalid UTF-8 replaced)
		require.Equal(t, want, got)
		var in, res map[string]json.RawMessage
		require.NoError(t, json.Unmarshal(body, &in))
		require.NoError(t, json.Unmarshal(out, &res))
		delete(in, "model")
		delete(res, "model")
		require.Equal(t, len(in), len(res))
		for k, v := range in {
			var a, b bytes.Buffer
			require.NoError(t, json.Compact(&a, v))
			require.NoError(t, json.Compact(&b, res[k]))
			require.Equal(t, a.String(), b.String(), "field %q of %q", k, body)
		}
		again, err := setBodyModel(out, model)
		require.NoError(t, err)
		require.Equal(t, string(out), string(again))
	})
}

func mustMarshal(t *testing.T, v any) []byte {
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}
