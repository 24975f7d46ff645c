package jsonexact

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

type part struct {
	Type string  `json:"type"`
	Text *string `json:"text"`
}

type msg struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
	Parts   []part          `json:"parts"`
	Source  *part           `json:"source"`
	Meta    map[string]part `json:"meta"`
	Any     any             `json:"any"`
	Skip    string          `json:"-"`
	Plain   int
}

type req struct {
	Model    string `json:"model,omitempty"`
	Messages []msg  `json:"messages"`
}

// Unmarshal reads what Python's json.loads and a pydantic model read:
// exact names only, the last of a repeated name, nothing merged.
func TestUnmarshalReadsAsPython(t *testing.T) {
	text := func(s string) *string { return &s }
	for _, c := range []struct {
		name, in string
		want     req
	}{
		{"exact", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
			req{Model: "m", Messages: []msg{{Role: "user", Content: json.RawMessage(`"hi"`)}}}},
		{"case variants are unknown members", `{"Model":"x","messages":[{"ROLE":"user","role":"system","Content":"no"}],"MESSAGES":[]}`,
			req{Messages: []msg{{Role: "system"}}}},
		{"case variant alone is absent", `{"Messages":[{"role":"user"}]}`, req{}},
		{"escaped name is the name", `{"mod\u0065l":"e"}`, req{Model: "e"}},
		{"repeated list: the last, elements not reused", `{"messages":[{"role":"user","content":"a"}],"messages":[{"content":"b"}]}`,
			req{Messages: []msg{{Content: json.RawMessage(`"b"`)}}}},
		{"repeated object: the last, not merged", `{"messages":[{"source":{"type":"t","text":"x"},"source":{"type":"u"}}]}`,
			req{Messages: []msg{{Source: &part{Type: "u"}}}}},
		{"repeated map: the last, not merged", `{"messages":[{"meta":{"a":{"type":"1"}},"meta":{"b":{"TYPE":"x","type":"2"}}}]}`,
			req{Messages: []msg{{Meta: map[string]part{"b": {Type: "2"}}}}}},
		{"map keys are data, kept as written", `{"messages":[{"meta":{"A":{"type":"1"},"a":{"type":"2"},"a":{"type":"3"}}}]}`,
			req{Messages: []msg{{Meta: map[string]part{"A": {Type: "1"}, "a": {Type: "3"}}}}}},
		{"nested structs in lists", `{"messages":[{"parts":[{"Type":"x","type":"text","text":"a","Text":"b"},{"TEXT":"c"}]}]}`,
			req{Messages: []msg{{Parts: []part{{Type: "text", Text: text("a")}, {}}}}}},
		{"raw and interface values as written", `{"messages":[{"content":{"Role":1,"Role":2},"any":{"X":1}}]}`,
			req{Messages: []msg{{Content: json.RawMessage(`{"Role":1,"Role":2}`), Any: map[string]any{"X": 1.0}}}}},
		{"untagged field by its Go name, tagged - never", `{"messages":[{"Plain":3,"plain":4,"Skip":"s","-":"s"}]}`,
			req{Messages: []msg{{Plain: 3}}}},
		{"null", `null`, req{}},
		{"whitespace", " \n{ \"model\" : \"m\" } \t", req{Model: "m"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var got req
			require.NoError(t, Unmarshal([]byte(c.in), &got))
			require.Equal(t, c.want, got)
		})
	}
}

// What json.Unmarshal refuses, Unmarshal refuses.
func TestUnmarshalRefusesWhatEncodingJSONRefuses(t *testing.T) {
	for _, in := range []string{
		``, `{`, `{"model":}`, `{"model":"m",}`, `{"model":"m"} x`, `{"messages":[1]}`, `{"model":5}`,
		`{"messages":{"role":"user"}}`, `[1]`, `{"mod\x":1}`,
		`{"messages":[` + strings.Repeat(`{"any":`, 10001) + `1` + strings.Repeat(`}`, 10001) + `]}`,
	} {
		var v req
		require.Error(t, Unmarshal([]byte(in), &v), in)
		require.Error(t, json.Unmarshal([]byte(in), &v), in)
	}
	var v req
	require.Error(t, Unmarshal([]byte(`{}`), v))
	require.Error(t, Unmarshal([]byte(`{}`), nil))
}

// unmarshaler decodes itself: Unmarshal passes its value as written.
type unmarshaler struct{ raw string }

func (u *unmarshaler) UnmarshalJSON(b []byte) error { u.raw = string(b); return nil }

func TestUnmarshalLeavesUnmarshalersTheirBytes(t *testing.T) {
	var v struct {
		U  unmarshaler   `json:"u"`
		P  *unmarshaler  `json:"p"`
		Us []unmarshaler `json:"us"`
	}
	require.NoError(t, Unmarshal([]byte(`{"u":{"A":1,"A":2},"p":[1],"us":[{"x":1},2],"U":"no"}`), &v))
	require.Equal(t, `{"A":1,"A":2}`, v.U.raw)
	require.Equal(t, `[1]`, v.P.raw)
	require.Equal(t, []unmarshaler{{`{"x":1}`}, {`2`}}, v.Us)
}

// Many repeats of one name cost time linear in the body.
func TestUnmarshalManyRepeats(t *testing.T) {
	body := `{` + strings.Repeat(`"model":"a",`, 100000) + `"model":"b"}`
	var v req
	require.NoError(t, Unmarshal([]byte(body), &v))
	require.Equal(t, "b", v.Model)
}
