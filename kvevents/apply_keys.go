package kvevents

import (
	"github.com/kvroute/kvroute/kvevents/wire"
)

// adapter returns the LoRA adapter that roots a store's keys: lora_name,
// else the name of a typed LoRA extra key, else the configured name of
// lora_id. "" with named=true is the base model; named=false is an adapter
// (lora_id present) whose name is unknown.
func (a *Applier) adapter(e *wire.Event) (name string, named bool) {
	if e.LoRAName != "" {
		return e.LoRAName, true
	}
	for _, keys := range e.ExtraKeys {
		for _, k := range keys {
			if k.Kind == wire.ExtraKeyLoRA && k.Value != "" {
				return k.Value, true
			}
		}
	}
	if !e.HasLoRAID {
		return "", true
	}
	name, ok := a.loras[e.LoRAID]
	return name, ok && name != ""
}

// extraKeys converts the event's extra keys to the index's per-block string
// form (nil when no block has any): the adapter's name and typed LoRA keys
// are removed (the adapter is the key root instead), a multimodal
// [identifier, offset] pair becomes its identifier, bytes and opaque keys
// their hex. vLLM writes the adapter's name as the first extra key of every
// block of a LoRA request (then the multimodal items, the cache salt on
// block 0 and prompt-embedding hashes), so only a leading key equal to the
// adapter is its name: a later key that spells the same string, such as a
// salt chosen equal to the adapter's name, is kept as the key it is. SGLang's cache_salt becomes
// the last extra key of block 0 when the event starts at block 0 (no
// parent), which is where the request side puts the salt; later blocks
// inherit it through the parent chain.
func (st *endpointState) extraKeys(e *wire.Event, adapter string) [][]string {
	salt := e.CacheSalt != "" && !e.HasParent
	if len(e.ExtraKeys) == 0 && !salt {
		return nil
	}
	n := len(e.BlockHashes)
	st.flat, st.ends = st.flat[:0], st.ends[:0]
	for i := 0; i < n; i++ {
		if i < len(e.ExtraKeys) {
			for j, k := range e.ExtraKeys[i] {
				if k.Kind == wire.ExtraKeyLoRA || j == 0 && k.Kind == wire.ExtraKeyString && adapter != "" && k.Value == adapter {
					continue
				}
				st.flat = append(st.flat, k.Value)
			}
		}
		if i == 0 && salt {
			st.flat = append(st.flat, e.CacheSalt)
		}
		st.ends = append(st.ends, len(st.flat))
	}
	if len(st.flat) == 0 {
		return nil
	}
	st.extra = st.extra[:0]
	start := 0
	for _, end := range st.ends {
		var keys []string
		if end > start {
			keys = st.flat[start:end:end]
		}
		st.extra = append(st.extra, keys)
		start = end
	}
	return st.extra
}
