package admission

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
)

// FuzzLoadConfig: LoadConfig never panics, and what it accepts New builds
// and MarshalJSON writes back to the same Config.
func FuzzLoadConfig(f *testing.F) {
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"objectives":[{"name":"chat","priority":1,"queueTimeout":"5s"},{"name":"batch","priority":-1}]}`))
	f.Add([]byte(`{"fairness":"deficit_round_robin","quantum":512,"ordering":"earliest_deadline","saturation":{"maxPrefillBacklog":"-1s","maxOpenRequests":4}}`))
	f.Add([]byte(`{"recheck":10}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := LoadConfig(bytes.NewReader(data))
		if err != nil {
			return
		}
		c, err := New(cfg, Options{})
		if err != nil {
			t.Fatalf("LoadConfig accepted what New refuses: %v", err)
		}
		c.Close()
		out, err := json.Marshal(cfg)
		if err != nil {
			t.Fatal(err)
		}
		back, err := LoadConfig(bytes.NewReader(out))
		if err != nil {
			t.Fatalf("re-reading %s: %v", out, err)
		}
		if !reflect.DeepEqual(cfg, back) {
			t.Fatalf("round trip changed %+v into %+v", cfg, back)
		}
	})
}
