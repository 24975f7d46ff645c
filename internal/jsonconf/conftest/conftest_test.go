package conftest

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// plain decodes as encoding/json does: case-insensitive, repeated keys
// merged, so each of Check's rules has something to catch.
type plain struct {
	N int `json:"n"`
}

// Check reports every kind of difference, naming the case.
func TestCheckReportsEachDifference(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cases []Case[plain]
		rt    plain
		frag  []string
		want  string
	}{
		{name: "an error wanted", cases: []Case[plain]{{Name: "case variant", Doc: `{"N":1}`, Err: "unknown key"}},
			want: `case "case variant": {"N":1} decoded, want an error containing "unknown key"`},
		{name: "another error", cases: []Case[plain]{{Name: "kind", Doc: `{"n":"x"}`, Err: "bare number"}},
			want: `case "kind": error`},
		{name: "an unwanted error", cases: []Case[plain]{{Name: "ok", Doc: `{"n":`}}, want: `case "ok": {"n":`},
		{name: "another value", cases: []Case[plain]{{Name: "set", Doc: `{"n":2}`, Want: func(p *plain) { p.N = 3 }}},
			want: `case "set": {"n":2} decoded to {N:2}, want {N:3}`},
		{name: "a fragment missing", rt: plain{N: 1}, frag: []string{`"n":2`}, want: `marshal wrote {"n":1}, without "n":2`},
		{name: "all met", cases: []Case[plain]{{Name: "set", Doc: `{"n":2}`, Want: func(p *plain) { p.N = 2 }}},
			rt: plain{N: 4}, frag: []string{`"n":4`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Check(plain{}, tc.cases, tc.rt, tc.frag...)
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tc.want)
		})
	}
}
