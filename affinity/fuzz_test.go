package affinity

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
)

// FuzzLoadConfig checks that decoding arbitrary bytes never panics, that
// whatever decodes is valid, and that it survives an encode/decode round trip
// (seed corpus in testdata/fuzz/FuzzLoadConfig).
func FuzzLoadConfig(f *testing.F) {
	f.Add([]byte(`{"affinityThreshold":0.8,"maxTTFTPenalty":"18s","peakPrefillThroughput":15928}`))
	f.Add([]byte(`{"maxTTFTPenalty":18000,"missingSignalPolicy":"widen","includeRequestTokens":true}`))
	f.Add([]byte(`{"bogus":1}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := LoadConfig(bytes.NewReader(data))
		if err != nil {
			return
		}
		if err := cfg.Validate(); err != nil {
			t.Fatalf("decoded config does not validate: %v", err)
		}
		enc, err := json.Marshal(cfg)
		if err != nil {
			t.Fatalf("marshal: %v", err)
		}
		back, err := LoadConfig(bytes.NewReader(enc))
		if err != nil {
			t.Fatalf("round trip of %s: %v", enc, err)
		}
		if !reflect.DeepEqual(back, cfg) {
			t.Fatalf("round trip changed %+v to %+v", cfg, back)
		}
	})
}
