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
	f.Add([]byte(vllmSample+cacheSeries("0", "16", "1000", "8000", "40.0")), 0)
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
		c := sig.Cache
		if c.Reported && (c.Invalid || c.GPUBlocks <= 0 || c.GPUBlocks > maxCacheBlocks || c.BlockSize <= 0 || c.BlockSize > maxBlockSize ||
			c.CPUBlocks < 0 || c.CPUBlocks > maxCacheBlocks || math.IsNaN(c.OffloadingGiB) || c.OffloadingGiB < 0) {
			t.Fatalf("cache configuration out of bounds: %+v", c)
		}
		if !c.Reported && c != (CacheInfo{}) && c != (CacheInfo{Invalid: true}) {
			t.Fatalf("unreported cache configuration with values: %+v", c)
		}
		if c.OffloadBackend != "" && !isWord(c.OffloadBackend) {
			t.Fatalf("offload backend kept: %q", c.OffloadBackend)
		}
		for _, n := range append(slices.Clone(l.Running), l.Waiting...) {
			if !validAdapterName(n) {
				t.Fatalf("invalid adapter name kept: %q", n)
			}
		}
	})
}
