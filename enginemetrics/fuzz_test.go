package enginemetrics

import (
	"math"
	"slices"
	"testing"
)

// FuzzParseSignal feeds arbitrary bodies to the parse path: it never panics,
// and a signal it accepts holds finite, non-negative, bounded values.
// Seeds live in testdata/fuzz/FuzzParseSignal.
func FuzzParseSignal(f *testing.F) {
	f.Add([]byte(vllmSample), 0)
	f.Add([]byte(dpSample), 1)
	f.Add([]byte(loraSample), 0)
	f.Fuzz(func(t *testing.T, body []byte, rank int) {
		sig, _, err := parse(body, rank)
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
		l := sig.LoRA
		if len(l.Running) > MaxLoRAAdapters || len(l.Waiting) > MaxLoRAAdapters || l.MaxLoRA < 0 || l.MaxLoRA > maxMaxLoRA {
			t.Fatalf("LoRA state out of bounds: %+v", l)
		}
		for _, n := range append(slices.Clone(l.Running), l.Waiting...) {
			if !validAdapterName(n) {
				t.Fatalf("invalid adapter name kept: %q", n)
			}
		}
	})
}
