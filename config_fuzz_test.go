package kvroute

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
)

// FuzzLoadConfig checks that the configuration decoder never panics, that
// whatever it accepts validates, and that an accepted configuration survives
// a marshal / load round trip unchanged (durations as strings).
func FuzzLoadConfig(f *testing.F) {
	def, _ := json.Marshal(DefaultConfig())
	f.Add(def)
	for _, s := range []string{
		`{"speculative":{"ttl":2000}}`, `{"affinity":{"maxTTFTPenalty":"18s"},"index":{"tierWeights":{"cpu":0.5}}}`,
		`{"events":{"enabled":false,"replayClient":{"timeout":"1m"},"limits":{}}}`, `{"index":{"blockSize":16}}`,
		`{"render":{"url":"http://r:8000","modelName":""},"model":"m"}`, `{"model":"a","model":"b"}`, `null`, `[]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := LoadConfig(bytes.NewReader(data))
		if err != nil {
			return
		}
		if err := cfg.Validate(); err != nil {
			t.Fatalf("LoadConfig(%q) accepted an invalid config: %v", data, err)
		}
		out, err := json.Marshal(cfg)
		if err != nil {
			t.Fatalf("marshal: %v", err)
		}
		back, err := LoadConfig(bytes.NewReader(out))
		if err != nil {
			t.Fatalf("round trip of %s: %v", out, err)
		}
		if !reflect.DeepEqual(cfg, back) {
			t.Fatalf("round trip changed\n%+v\nto\n%+v", cfg, back)
		}
	})
}
