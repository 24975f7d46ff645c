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
// SGLang's "DISK" → "storage"; anything else is kept, lower-cased. Known
// values do not allocate.
func normalizeMedium(m string) string {
	switch m {
	case "", "GPU", "gpu":
		return tierGPU
	case "CPU", "CPU_PINNED", "cpu", "cpu_pinned":
		return tierCPU
	case "STORAGE", "DISK", "storage", "disk":
		return tierStorage
	case "EXTERNAL", "external":
		return "external"
	}
	return strings.ToLower(m)
}
