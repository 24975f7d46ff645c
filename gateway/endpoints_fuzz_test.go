package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/kvroute/kvroute"
)

// endpointKeys are the JSON names of kvroute.Endpoint's fields.
var endpointKeys = func() map[string]bool {
	keys := map[string]bool{}
	t := reflect.TypeFor[kvroute.Endpoint]()
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		keys[name] = true
	}
	return keys
}()

// FuzzLoadEndpoints feeds arbitrary endpoints files to LoadEndpoints (seed
// corpus in testdata/fuzz/FuzzLoadEndpoints): it never panics; every
// refusal wraps ErrInvalidEndpoints; a file it accepts is exactly one JSON
// array, nothing after it, of at least one endpoint with distinct IDs,
// whose entries' keys are each exactly one of Endpoint's JSON names; and
// the endpoints written back as a file load identically.
func FuzzLoadEndpoints(f *testing.F) {
	for _, s := range []string{
		`[{"id":"10.0.0.7:8000","labels":{"zone":"a"}},{"id":"10.0.0.8:8000","address":"https://vllm-b.internal:8443"}]`,
		`[{"id":"10.0.0.1:8000","role":"prefill","rank":1,"models":["m"]}]`,
		`[{"id":"h:1"}] []`, `[{"id":"h:1"}]]`, `[{"ID":"h:1"}]`, `[{"id":"h:1"},{"id":"h:1"}]`, `[{"id":"h:1","port":1}]`, `[]`, `[{"id":`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		eps, err := LoadEndpoints(bytes.NewReader(data))
		if err != nil {
			if !errors.Is(err, ErrInvalidEndpoints) {
				t.Fatalf("%q: error %v does not wrap ErrInvalidEndpoints", data, err)
			}
			return
		}
		if !json.Valid(data) {
			t.Fatalf("%q: accepted what is not one JSON value: %+v", data, eps)
		}
		if len(eps) == 0 {
			t.Fatalf("%q: accepted without endpoints", data)
		}
		var entries []map[string]json.RawMessage
		if err := json.Unmarshal(data, &entries); err != nil {
			t.Fatalf("%q: accepted, but not an array of objects: %v", data, err)
		}
		for i, e := range entries {
			for k := range e {
				if !endpointKeys[k] {
					t.Fatalf("%q: entry %d has the key %q, not one of Endpoint's", data, i, k)
				}
			}
		}
		seen := map[string]bool{}
		for _, e := range eps {
			if seen[e.ID] {
				t.Fatalf("%q: endpoint %q twice", data, e.ID)
			}
			seen[e.ID] = true
		}
		enc, err := json.Marshal(eps)
		if err != nil {
			t.Fatalf("marshal %+v: %v", eps, err)
		}
		back, err := LoadEndpoints(bytes.NewReader(enc))
		if err != nil {
			t.Fatalf("%q written back as %s: %v", data, enc, err)
		}
		if !reflect.DeepEqual(back, eps) {
			t.Fatalf("%q written back as %s changed %+v to %+v", data, enc, eps, back)
		}
	})
}
