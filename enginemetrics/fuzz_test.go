package enginemetrics

import (
	"math"
	"testing"
)

// FuzzParseSignal feeds arbitrary bodies to the parse path: it never panics,
// and a signal it accepts holds finite, non-negative, bounded values.
// Seeds live in testdata/fuzz/FuzzParseSignal.
func FuzzParseSignal(f *testing.F) {
	f.Add([]byte(vllmSample), 0)
	f.Add([]byte(dpSample), 1)
	f.Fuzz(func(t *testing.T, body []byte, rank int) {
		sig, err := parseSignal(body, rank)
		if err != nil {
			if err.reason == "" {
				t.Fatalf("failure without a reason: %v", err)
			}
			return
		}
		if sig.Waiting < 0 || sig.Waiting > maxQueueLength || sig.Running < 0 || sig.Running > maxQueueLength {
			t.Fatalf("queue lengths out of range: %+v", sig)
		}
		if math.IsNaN(sig.KVCacheUsage) || math.IsInf(sig.KVCacheUsage, 0) || sig.KVCacheUsage < 0 {
			t.Fatalf("KV-cache usage out of range: %+v", sig)
		}
	})
}
