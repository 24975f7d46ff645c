package render

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestPrepareBodyOmitMMKwargsSplicesBeforeFinalBrace(t *testing.T) {
	in := `{"model":"m", "messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBOR="}}]}], "return_mm_kwargs":true }` + "\n"
	out, _, _, err := prepareBody([]byte(in), false, true)
	require.NoError(t, err)
	// Byte-preserving up to the final '}', then the splice wins over the
	// client's value (vLLM keeps the last duplicate key).
	require.Equal(t, `{"model":"m", "messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBOR="}}]}], "return_mm_kwargs":true ,"return_mm_kwargs":false}`+"\n", string(out))

	out, _, _, err = prepareBody([]byte(`{}`), false, true)
	require.NoError(t, err)
	require.Equal(t, `{"return_mm_kwargs":false}`, string(out))
}

func TestPrepareBodyWithoutEditsReturnsTheSameBytes(t *testing.T) {
	in := []byte(`{"prompt":"x",  "cache_salt":"tenant-7"}`)
	out, salt, ok, err := prepareBody(in, false, false)
	require.NoError(t, err)
	require.Equal(t, &in[0], &out[0], "no copy when nothing is edited")
	require.True(t, ok)
	require.Equal(t, "tenant-7", salt)
}

func TestPrepareBodyPrefillOnly(t *testing.T) {
	cases := []struct{ name, in, want string }{
		{"adds max_tokens", `{"prompt":"x"}`, `{"prompt":"x","max_tokens":1}`},
		{"replaces max_tokens in place", `{"max_tokens": 4096, "prompt":"x"}`, `{"max_tokens": 1, "prompt":"x"}`},
		{"caps max_completion_tokens", `{"max_completion_tokens":512,"max_tokens":null}`, `{"max_completion_tokens":1,"max_tokens":1}`},
		{"keeps small max_completion_tokens", `{"max_completion_tokens":1,"max_tokens":3}`, `{"max_completion_tokens":1,"max_tokens":1}`},
		{"keeps null max_completion_tokens", `{"max_completion_tokens":null}`, `{"max_completion_tokens":null,"max_tokens":1}`},
		{"zeroes min_tokens", `{"min_tokens":16,"max_tokens":32}`, `{"min_tokens":0,"max_tokens":1}`},
		{"every duplicate", `{"max_tokens":5,"max_tokens":6}`, `{"max_tokens":1,"max_tokens":1}`},
		{"nested keys untouched", `{"x":{"max_tokens":9}}`, `{"x":{"max_tokens":9},"max_tokens":1}`},
		{"skipped with truncate_prompt_tokens", `{"truncate_prompt_tokens":128,"max_tokens":64}`, `{"truncate_prompt_tokens":128,"max_tokens":64}`},
		{"null truncate_prompt_tokens does not skip", `{"truncate_prompt_tokens":null,"max_tokens":64}`, `{"truncate_prompt_tokens":null,"max_tokens":1}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, _, _, err := prepareBody([]byte(tc.in), true, false)
			require.NoError(t, err)
			require.Equal(t, tc.want, string(out))
		})
	}
	out, _, _, err := prepareBody([]byte(`{"max_tokens":8}`), true, true)
	require.NoError(t, err)
	require.Equal(t, `{"max_tokens":1,"return_mm_kwargs":false}`, string(out))
}

func TestPrepareBodyCacheSalt(t *testing.T) {
	for in, want := range map[string]string{
		`{"cache_salt":"a"}`:                  "a",
		`{"cache_salt":"a\u00e9"}`:            "aé",
		`{"cache_salt":null}`:                 "",
		`{"cache_salt":""}`:                   "",
		`{"x":{"cache_salt":"nested"}}`:       "",
		`{"cache_salt":"a","cache_salt":"b"}`: "b",
	} {
		_, salt, ok, err := prepareBody([]byte(in), false, true)
		require.NoError(t, err)
		require.Equal(t, want, salt, in)
		require.Equal(t, want != "", ok, in)
	}
}

func TestPrepareBodyRejectsNonObjects(t *testing.T) {
	for _, in := range []string{``, `[]`, `"x"`, `{"a":1`, `{"a" 1}`, `{"a":1} trailing`, `{a:1}`, `{"a":tru}`} {
		_, _, _, err := prepareBody([]byte(in), true, true)
		require.Error(t, err, "input %q", in)
	}
}

// FuzzPrepareBody checks that the body edits never panic, accept every JSON
// object, and produce valid JSON with return_mm_kwargs false.
func FuzzPrepareBody(f *testing.F) {
	f.Add([]byte(`{"model":"m","max_tokens":10,"min_tokens":2,"max_completion_tokens":7,"cache_salt":"s"}`), true)
	f.Add([]byte(`{"truncate_prompt_tokens":5, "prompt":[1,2,3]}`), false)
	f.Add([]byte(`{}`), true)
	f.Fuzz(func(t *testing.T, in []byte, prefill bool) {
		out, _, _, err := prepareBody(in, prefill, true)
		var obj map[string]json.RawMessage
		isObject := json.Unmarshal(in, &obj) == nil && obj != nil
		if err != nil {
			if isObject {
				t.Fatalf("rejected the JSON object %q: %v", in, err)
			}
			return
		}
		if !isObject {
			return // accepted malformed string contents; the renderer rejects them
		}
		var got map[string]json.RawMessage
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("prepareBody(%q) = %q is not JSON: %v", in, out, err)
		}
		if string(got["return_mm_kwargs"]) != "false" {
			t.Fatalf("prepareBody(%q) = %q does not end with return_mm_kwargs false", in, out)
		}
	})
}
