package llmd_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/llmd"
)

// FuzzTranslate checks that Translate never panics, that whatever it
// accepts validates, and that an accepted configuration, marshalled (in
// kvroute's own keys: the llm-d blocks are translated away), reads back the
// same through kvroute.LoadConfig and through Translate.
func FuzzTranslate(f *testing.F) {
	def, _ := json.Marshal(kvroute.DefaultConfig())
	f.Add(def)
	f.Add([]byte(llmdBlocks))
	for _, s := range []string{
		`{"precise-prefix-cache-producer":{"speculativeTTL":2000}}`, `{"blockSize":64,"precise-prefix-cache-producer":{"tokenProcessorConfig":{"blockSizeTokens":16}}}`,
		`{"token-load-scorer":{"queueThresholdTokens":0},"token-load-scorer":{}}`, `{"prefix-cache-affinity-filter":null}`,
		`{"index":{"blockSize":16},"precise-prefix-cache-producer":{"tokenProcessorConfig":{"blockSize":16}}}`, `null`, `[]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := llmd.Translate(bytes.NewReader(data))
		if err != nil {
			return
		}
		if err := cfg.Validate(); err != nil {
			t.Fatalf("Translate(%q) accepted an invalid config: %v", data, err)
		}
		out, err := json.Marshal(cfg)
		if err != nil {
			t.Fatalf("marshal: %v", err)
		}
		back, err := kvroute.LoadConfig(bytes.NewReader(out))
		if err != nil {
			t.Fatalf("round trip of %s: %v", out, err)
		}
		if !reflect.DeepEqual(cfg, back) {
			t.Fatalf("round trip changed\n%+v\nto\n%+v", cfg, back)
		}
		again, err := llmd.Translate(bytes.NewReader(out))
		if err != nil || !reflect.DeepEqual(cfg, again) {
			t.Fatalf("Translate of its own output %s: %v, %+v", out, err, again)
		}
	})
}
