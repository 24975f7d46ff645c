package jsonexact

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/kvroute/kvroute/internal/jsonscan"
)

// FuzzUnmarshal: Unmarshal never panics and refuses every malformed input;
// the text it hands encoding/json is valid JSON that filtering again leaves
// as it is (no case variant, no repeated name is left in it).
func FuzzUnmarshal(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","messages":[{"role":"user","content":"hi","parts":[{"type":"t","text":"x"}]}]}`,
		`{"Model":"x","model":"m","messages":[{"ROLE":"a"}],"messages":[{"meta":{"a":{"type":"1"},"a":{"type":"2"}}}]}`,
		`{"messages":[{"source":{"type":"t"},"source":{"text":"u"},"any":{"X":[1,{"Y":null}]},"Plain":1}]}`,
		`null`, `[]`, `{"messages":[1,]}`, `{"mod\u0065l":"e"}`, "{\"model\":\"\xff\"}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		var got req
		err := Unmarshal(in, &got)
		if !json.Valid(in) {
			if err == nil {
				t.Fatalf("accepted malformed %q", in)
			}
			return
		}
		s := jsonscan.Scanner{Buf: in}
		s.WS()
		out, ferr := filter(nil, &s, reflect.TypeFor[*req](), 1)
		if ferr != nil || !json.Valid(out) {
			t.Fatalf("filtered %q into malformed %q (%v)", in, out, ferr)
		}
		// The filtered text holds no case variant and no repeat: decoding
		// it again changes nothing.
		again, aerr := filter(nil, &jsonscan.Scanner{Buf: out}, reflect.TypeFor[*req](), 1)
		if aerr != nil || string(again) != string(out) {
			t.Fatalf("filter is not idempotent on %q: %q then %q", in, out, again)
		}
		if err == nil {
			var want req
			if json.Unmarshal(out, &want) != nil {
				t.Fatalf("filtered text of %q does not decode", in)
			}
		}
	})
}
