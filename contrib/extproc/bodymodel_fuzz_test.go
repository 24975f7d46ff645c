package extproc

import (
	"bytes"
	"encoding/json"
	"testing"
)

// FuzzRequestModelMatchesEncodingJSON holds the picker's model reader to
// encoding/json reading the body into a map, which keys members by their
// exact names and keeps the last of a repeated one, as vLLM does (seed
// corpus in testdata/fuzz/FuzzRequestModelMatchesEncodingJSON): it never
// panics; it accepts exactly the bodies that are one JSON object whose
// "model" is a string, null or absent; and the model it returns is that
// member's value ("" for null or absent), never a case variant's or a
// nested member's.
func FuzzRequestModelMatchesEncodingJSON(f *testing.F) {
	for _, s := range []string{
		`{"model":"a","prompt":"x"}`, `{"Model":"lora-x"}`, `{"model":"a","model":"b"}`, `{"model":"a","model":null}`,
		`{"mod\u0065l":"\u00e9"}`, `{"messages":[{"model":"nested"}]}`, `{"model":5}`, `null`, `{"model":"a"`, "{\"model\":\"\xff\"}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		got, err := requestModel(body)
		var members map[string]json.RawMessage
		isObject := json.Unmarshal(body, &members) == nil && bytes.TrimLeft(body, " \t\r\n")[0] == '{'
		var want *string
		ok := isObject && json.Unmarshal(members["model"], &want) == nil
		if members["model"] == nil {
			ok, want = isObject, nil
		}
		if err != nil {
			if ok {
				t.Fatalf("%q: refused (%v), encoding/json reads model %v", body, err, want)
			}
			return
		}
		if !ok {
			t.Fatalf("%q: accepted with model %q, encoding/json refuses it", body, got)
		}
		wantModel := ""
		if want != nil {
			wantModel = *want
		}
		if got != wantModel {
			t.Fatalf("%q: model %q, encoding/json reads %v", body, got, want)
		}
	})
}
