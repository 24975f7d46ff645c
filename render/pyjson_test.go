package render

import (
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The expected strings were produced by CPython 3 with
// json.dumps(json.loads(input)), the formatting vLLM applies to Anthropic
// tool_use input when it converts Messages itself.
func TestPyDumpsMatchesPythonJSONDumps(t *testing.T) {
	cases := []struct{ name, in, want string }{
		{"non-ASCII, floats, -0, nested order",
			`{"city": "Zürich", "emoji": "🎉", "n": 1.0, "big": 1e20, "list": [1, 2.50, -0], "nested": {"z": 1, "a": null}}`,
			`{"city": "Z\u00fcrich", "emoji": "\ud83c\udf89", "n": 1.0, "big": 1e+20, "list": [1, 2.5, 0], "nested": {"z": 1, "a": null}}`},
		{"duplicate key keeps first position and last value",
			`{"b":1,"a":2,"b":3}`,
			`{"b": 3, "a": 2}`},
		{"escapes",
			`{"s":"tab\tnl\nq\"bs\\ctl\u0001del\u007f/slash<>&"}`,
			`{"s": "tab\tnl\nq\"bs\\ctl\u0001del\u007f/slash<>&"}`},
		{"float repr",
			`[1e16,1e15,0.0001,0.00001,123.456,-0.0,1E400,-1e400,1e-400,5e-324,1.7976931348623157e308,0.1,100.0,12345678901234567890,-0,3.0e2]`,
			`[1e+16, 1000000000000000.0, 0.0001, 1e-05, 123.456, -0.0, Infinity, -Infinity, 0.0, 5e-324, 1.7976931348623157e+308, 0.1, 100.0, 12345678901234567890, 0, 300.0]`},
		{"BMP and astral escapes, empty containers, literals",
			`{"text":"日本語","snow":"\u2603","astral":"\ud83d\ude00","empty":{},"arr":[],"t":true,"f":false}`,
			`{"text": "\u65e5\u672c\u8a9e", "snow": "\u2603", "astral": "\ud83d\ude00", "empty": {}, "arr": [], "t": true, "f": false}`},
		{"bare string", `"just a string"`, `"just a string"`},
		{"lone surrogates stay escapes, pairs combine",
			`["\ud800", "\udc00x", "a\ud83d\ud83d\ude00", {"\udfff": "\uDBFF\uDFFF"}]`,
			`["\ud800", "\udc00x", "a\ud83d\ud83d\ude00", {"\udfff": "\udbff\udfff"}]`},
		{"deep nesting", `{"x":[{"y":[1,{"z":"é"}]}]}`, `{"x": [{"y": [1, {"z": "\u00e9"}]}]}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := pyDumps([]byte(tc.in))
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestPyDumpsRejectsInvalidJSON(t *testing.T) {
	for _, in := range []string{``, `{`, `{"a":}`, `[1,]`, `{"a":1} x`, "\"\xff\"", "{\"k\xc3\": 1}", strings.Repeat("[", maxDepth+2) + strings.Repeat("]", maxDepth+2)} {
		_, err := pyDumps([]byte(in))
		require.Error(t, err, "input %q", in)
	}
}

func TestPyFloatRepr(t *testing.T) {
	for f, want := range map[float64]string{
		0: "0.0", 1: "1.0", -2.5: "-2.5", 1e16: "1e+16", 9999999999999998: "9999999999999998.0",
		0.001: "0.001", 1.5e-10: "1.5e-10", 1e100: "1e+100", math.Inf(1): "Infinity", math.NaN(): "NaN",
	} {
		require.Equal(t, want, pyFloatRepr(f), "%v", f)
	}
}

// FuzzPyDumps checks that the Python-style serialization never panics and,
// for valid input, denotes the same JSON value as the input.
func FuzzPyDumps(f *testing.F) {
	f.Add([]byte(`{"city": "Zürich", "n": [1.0, -0, 1e20], "o": {"b": 1, "a": 2, "b": 3}}`))
	f.Add([]byte(`"\ud83d\ude00"`))
	f.Fuzz(func(t *testing.T, in []byte) {
		out, err := pyDumps(in)
		if err != nil {
			return
		}
		if strings.Contains(out, "Infinity") || strings.Contains(out, "NaN") {
			return // Python extensions, not JSON
		}
		var a, b any
		if json.Unmarshal(in, &a) != nil {
			t.Fatalf("pyDumps accepted invalid JSON %q", in)
		}
		if err := json.Unmarshal([]byte(out), &b); err != nil {
			t.Fatalf("pyDumps(%q) = %q is not JSON: %v", in, out, err)
		}
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("pyDumps(%q) = %q changes the value", in, out)
		}
	})
}
