package kvevents

import "strings"

// Index tiers produced by normalizeMedium.
const (
	tierGPU     = "gpu"
	tierCPU     = "cpu"
	tierStorage = "storage"
)

// normalizeMedium maps an event's medium to the index tier: nil/empty and
// "GPU" → "gpu"; "CPU" and SGLang's "CPU_PINNED" → "cpu"; "STORAGE" and
// SGLang's "DISK" → "storage"; anything else is kept, lower-cased. Names
// engines shipped before settling on these map to the same tiers: vLLM
// v0.26's secondary tiers "FS" and "OBJ" (STORAGE since) → "storage",
// SGLang's "CPU_TIER1" (host) → "cpu" and "CPU_TIER2" (storage) →
// "storage". Known values do not allocate.
func normalizeMedium(m string) string {
	switch m {
	case "", "GPU", "gpu":
		return tierGPU
	case "CPU", "CPU_PINNED", "CPU_TIER1", "cpu", "cpu_pinned", "cpu_tier1":
		return tierCPU
	case "STORAGE", "DISK", "FS", "OBJ", "CPU_TIER2", "storage", "disk", "fs", "obj", "cpu_tier2":
		return tierStorage
	case "EXTERNAL", "external":
		return "external"
	}
	return strings.ToLower(m)
}
