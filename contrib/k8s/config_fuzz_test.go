package k8s

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// FuzzLoadConfig feeds arbitrary documents to discovery's configuration
// loader (seed corpus in testdata/fuzz/FuzzLoadConfig): it never panics;
// a refusal names the configuration; and an accepted configuration,
// written back (durations as strings), loads identically.
func FuzzLoadConfig(f *testing.F) {
	for _, s := range []string{
		`{"namespace":"ns","pool":"p","poolVersion":"v1alpha2","debounce":"250ms","maxEndpoints":100}`,
		`{"namespace":"ns","selector":"app=vllm,tier in (a,b)","targetPorts":[8000,8001],"roleLabel":"llm-d.ai/role"}`,
		`{"debounce":250}`, `{"Namespace":"ns"}`, `{"namespace":"ns"} {}`, `null`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := LoadConfig(bytes.NewReader(data))
		if err != nil {
			if !strings.HasPrefix(err.Error(), "k8s: config") {
				t.Fatalf("%q: error %q does not name the configuration", data, err)
			}
			return
		}
		enc, err := json.Marshal(cfg)
		if err != nil {
			t.Fatalf("marshal %+v: %v", cfg, err)
		}
		back, err := LoadConfig(bytes.NewReader(enc))
		if err != nil {
			t.Fatalf("%q written back as %s: %v", data, enc, err)
		}
		if !reflect.DeepEqual(back, cfg) {
			t.Fatalf("%q written back as %s changed %+v to %+v", data, enc, cfg, back)
		}
	})
}
