package gateway

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestBodyModelReadsTheTopLevelModel(t *testing.T) {
	long := `{"prompt":"` + strings.Repeat(`w1 \"q\" \u00e9 `, 500) + `","model":"m1","nested":{"model":"no"},"a":[1,-2.5e3,true,false,null,{}]}`
	for _, c := range []struct{ body, want string }{
		{`{"model":"m"}`, "m"},
		{` {"prompt":"hi"} `, ""},
		{`{"model":null}`, ""},
		{`{"model":"a","model":"b"}`, "b"},
		{`{"mod\u0065l":"esc"}`, "esc"},
		{`{"model":"caf\u00e9"}`, "café"},
		{`{"model":"café/llama-3"}`, "café/llama-3"}, // plain: taken as is
		{"{\"model\":\"a\xffb\"}", "a\ufffdb"},       // invalid UTF-8: replaced, as encoding/json does
		{`{"model":"a\/b"}`, "a/b"},
		{`{"Model":"x"}`, ""},
		{long, "m1"},
	} {
		got, err := bodyModel([]byte(c.body))
		require.NoError(t, err, c.body)
		require.Equal(t, c.want, got, c.body)
	}
	for _, bad := range []string{``, `null`, `[1]`, `"s"`, `{"model":`, `{"model":1}`, `{"model":{}}`, `{"a":01}`,
		`{"a":"\x"}`, "{\"a\":\"\x01\"}", `{"a":1}x`, `{"a":[1,]}`, `{"a":-}`, `{"a":1.}`, `{"a":tru}`,
		strings.Repeat("[", 600) + strings.Repeat("]", 600)} {
		_, err := bodyModel([]byte(bad))
		require.Error(t, err, bad)
	}
	nest := func(n int) []byte { // an object holding n-1 nested arrays
		return []byte(`{"a":` + strings.Repeat("[", n-1) + strings.Repeat("]", n-1) + `}`)
	}
	_, err := bodyModel(nest(maxScanDepth))
	require.NoError(t, err, "nesting at the bound")
	_, err = bodyModel(nest(maxScanDepth + 1))
	require.Error(t, err, "nesting beyond the bound")
	require.Equal(t, maxScanDepth+1, depth(nest(maxScanDepth+1)))
}

// FuzzBodyModel checks bodyModel against encoding/json: it accepts exactly
// the JSON objects whose "model" is absent, null or a string, and returns
// that string.
func FuzzBodyModel(f *testing.F) {
	for _, s := range []string{`{"model":"m","prompt":"hi"}`, `{"model":null}`, `{"mod\u0065l":"x","a":[1,{"b":-0.5E+2}]}`,
		`{"model":1}`, `[]`, `null`, `{"a":"\ud83d\ude00"}`, "{\"a\":\"\xff\"}", `{"model":"a","model":"b"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		got, err := bodyModel(body)
		var m map[string]json.RawMessage
		jerr := json.Unmarshal(body, &m)
		isObject := bytes.HasPrefix(bytes.TrimLeft(body, " \t\r\n"), []byte("{"))
		want := ""
		wantOK := jerr == nil && isObject
		if raw, ok := m["model"]; wantOK && ok && string(raw) != "null" {
			wantOK = json.Unmarshal(raw, &want) == nil
		}
		if wantOK && len(body) > 0 && depth(body) > maxScanDepth {
			wantOK = false
		}
		require.Equal(t, wantOK, err == nil, "body %q: bodyModel error %v, encoding/json error %v", body, err, jerr)
		if wantOK {
			require.Equal(t, want, got, "body %q", body)
		}
	})
}

// depth returns the deepest nesting of brackets outside strings in a valid
// JSON text.
func depth(b []byte) int {
	d, deepest, inStr := 0, 0, false
	for i := 0; i < len(b); i++ {
		switch c := b[i]; {
		case inStr && c == '\\':
			i++
		case c == '"':
			inStr = !inStr
		case !inStr && (c == '{' || c == '['):
			d++
			deepest = max(deepest, d)
		case !inStr && (c == '}' || c == ']'):
			d--
		}
	}
	return deepest
}
