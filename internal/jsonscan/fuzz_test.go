package jsonscan

import (
	"encoding/json"
	"math"
	"testing"
)

// fuzzMaxDepth is the nesting bound of the fuzz test: deep enough for any
// input the fuzzer grows, shallow enough to be reached by a seed.
const fuzzMaxDepth = 64

// FuzzSkipValueMatchesEncodingJSON holds SkipValue to encoding/json: for a
// single value (whitespace around it allowed) it accepts exactly what
// json.Valid accepts, unless it refused for nesting beyond the bound, and
// every refusal is a *SyntaxError with an offset inside the input. Both
// depth rules run: with every value bounded and with only brackets bounded.
func FuzzSkipValueMatchesEncodingJSON(f *testing.F) {
	for _, s := range []string{
		`{"token_ids":[1,2,3],"features":null,"cache_salt":"s"}`,
		`[{"a":"\u00e9\n\"q\"","b":[true,false,null,-0.5e+3]}]`,
		`"\ud800"`, "\"\xff\"", "\"a\x01b\"", `"\x"`, `01`, `-`, `1.`, `1e`, `[1,]`, `{"a" 1}`, ` 7 `, `tru`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		want := json.Valid(in)
		for _, leaf := range []int{fuzzMaxDepth, math.MaxInt} {
			ok, deep, err := valid(in, fuzzMaxDepth, leaf)
			if err != nil {
				se, isSyntax := err.(*SyntaxError)
				if !isSyntax || se.Offset < 0 || se.Offset > len(in) {
					t.Fatalf("%q: error %#v", in, err)
				}
			}
			if deep {
				continue
			}
			if ok != want {
				t.Fatalf("%q (leaf bound %d): SkipValue %v (%v), encoding/json %v", in, leaf, ok, err, want)
			}
		}
	})
}
