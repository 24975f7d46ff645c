package approx

import (
	"bytes"
	"testing"
)

// FuzzLoadConfig: any input either decodes to a Config New accepts or is an
// error; it never panics.
func FuzzLoadConfig(f *testing.F) {
	for _, s := range []string{
		`{}`, `{"enabled":true}`, `{"ttl":"5m","refresh":"10ms","maxBytes":1024}`,
		`{"capacity":{"gpuBlocks":1,"cpuBlocks":2,"blockSize":16},"endpoints":{"a":{"gpuBlocks":3}}}`,
		`{"ttl":1}`, `{"endpoints":{"":{"gpuBlocks":1}}}`, `[`, `{"capacity":{"cpuBlocks":5}}`, `{"enabled":true,"maxBytes":10}`, `{"enabled":true,"maxBytes":1024}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := LoadConfig(bytes.NewReader(data))
		if err != nil {
			return
		}
		ix, err := New(cfg, Options{})
		if err != nil {
			t.Fatalf("LoadConfig accepted %q but New refused it: %v", data, err)
		}
		ix.Record("a", keys(1, 3))
		if ix.Stats().Bytes > ix.Config().MaxBytes {
			t.Fatalf("%q: %d bytes over the bound %d", data, ix.Stats().Bytes, ix.Config().MaxBytes)
		}
	})
}
