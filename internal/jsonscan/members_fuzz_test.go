package jsonscan

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
)

// fuzzMemberNames are the names FuzzMembersMatchesEncodingJSON looks for:
// request members kvroute reads, a one-letter name, the empty name and a
// name outside ASCII.
var fuzzMemberNames = []string{"model", "token_ids", "a", "", "é"}

// referenceMembers reads buf's top-level members with encoding/json's
// streaming decoder, which keys each member by its exact decoded name; ok is
// false when buf is not one JSON object. vals[i] is the last member named
// names[i].
func referenceMembers(buf []byte, names []string) (vals [][]byte, ok bool) {
	if !json.Valid(buf) || bytes.TrimLeft(buf, " \t\r\n")[0] != '{' {
		return nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(buf))
	if _, err := dec.Token(); err != nil {
		return nil, false
	}
	vals = make([][]byte, len(names))
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, false
		}
		key, _ := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, false
		}
		for i, n := range names {
			if key == n {
				vals[i] = v
			}
		}
	}
	return vals, true
}

// FuzzMembersMatchesEncodingJSON holds Members, the reader of every request
// body member vLLM reads by exact name, to encoding/json (seed corpus in
// testdata/fuzz/FuzzMembersMatchesEncodingJSON): it accepts exactly the
// bodies that are one valid JSON object; every refusal is a *SyntaxError
// with an offset inside the input; and each value it finds is the raw text
// of the last top-level member of that exact name, a slice of the input
// that is itself valid JSON, nil when no member has the name.
func FuzzMembersMatchesEncodingJSON(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","token_ids":[1,2,3],"a":null}`,
		` { "model" : "x" , "model" : "y" } `,
		`{"Model":"m","MODEL":"n"}`,
		`{"mod\u0065l":{"a":1},"":[],"\u00e9":true}`,
		`{"a":{"model":"nested"}}`,
		`{}`, `[]`, `null`, `{"a":1}{}`, `{"a":1,}`, `{"a" 1}`, "{\"\xff\":1}", `{"\ud800":2}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, buf []byte) {
		vals := make([][]byte, len(fuzzMemberNames))
		err := Members(buf, fuzzMemberNames, vals)
		want, ok := referenceMembers(buf, fuzzMemberNames)
		if err != nil {
			var se *SyntaxError
			if !errors.As(err, &se) || se.Offset < 0 || se.Offset > len(buf) {
				t.Fatalf("%q: error %#v", buf, err)
			}
			if ok {
				t.Fatalf("%q: Members refused a JSON object: %v", buf, err)
			}
			return
		}
		if !ok {
			t.Fatalf("%q: Members accepted what is not one JSON object", buf)
		}
		for i, name := range fuzzMemberNames {
			if (vals[i] == nil) != (want[i] == nil) || !bytes.Equal(vals[i], want[i]) {
				t.Fatalf("%q: member %q is %q, encoding/json reads %q", buf, name, vals[i], want[i])
			}
			if vals[i] != nil && !json.Valid(vals[i]) {
				t.Fatalf("%q: member %q is %q, not a JSON value", buf, name, vals[i])
			}
		}
	})
}
