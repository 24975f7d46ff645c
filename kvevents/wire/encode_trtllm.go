package wire

// appendTRTLLMEvent writes e as TensorRT-LLM's publisher does (msgspec map
// events of its own structs, tag "type" first, None defaults omitted).
// BlockStored: block_hashes, parent_block_hash, token_ids, block_size,
// lora_id, medium, lora_name (always written), then when set extra_keys,
// group_idx, kv_cache_spec_kind, kv_cache_spec_sliding_window, locality and
// mm_keys. BlockRemoved: block_hashes, medium, then group_idx and locality
// when set. Its structs have no ownership or session_id. Multimodal keys
// (ExtraKeyMM) go to mm_keys; a block's other keys stay in extra_keys.
func appendTRTLLMEvent(dst []byte, e *Event) []byte {
	switch e.Type {
	case EventBlockStored:
		extra, mm := splitMMKeys(e.ExtraKeys)
		n := 8
		for _, present := range [...]bool{extra, e.HasGroup, e.Kind != "", e.HasSlidingWindow, e.Locality != "", mm} {
			if present {
				n++
			}
		}
		dst = appendMapHeader(dst, n)
		dst = appendStoredFields(dst, e)
		if extra {
			dst = appendStr(dst, "extra_keys")
			dst = appendKeysWhere(dst, e.ExtraKeys, false)
		}
		if e.HasGroup {
			dst = appendStr(dst, "group_idx")
			dst = appendInt(dst, int64(e.Group))
		}
		if e.Kind != "" {
			dst = appendStr(dst, "kv_cache_spec_kind")
			dst = appendStr(dst, e.Kind)
		}
		if e.HasSlidingWindow {
			dst = appendStr(dst, "kv_cache_spec_sliding_window")
			dst = appendInt(dst, e.SlidingWindow)
		}
		dst = appendOmittable(dst, "locality", e.Locality)
		if mm {
			dst = appendStr(dst, "mm_keys")
			dst = appendKeysWhere(dst, e.ExtraKeys, true)
		}
	case EventBlockRemoved:
		dst = appendBlockRemoved(dst, e, false) // TensorRT-LLM's removals have no ownership
	case EventAllBlocksCleared:
		dst = appendMapHeader(dst, 1)
		dst = appendStr(dst, "type")
		dst = appendStr(dst, tagAllBlocksCleared)
	}
	return dst
}

// splitMMKeys reports whether keys hold non-multimodal keys (written as
// extra_keys) and multimodal ones (written as mm_keys).
func splitMMKeys(keys [][]ExtraKey) (extra, mm bool) {
	for _, block := range keys {
		for _, k := range block {
			if k.Kind == ExtraKeyMM {
				mm = true
			} else {
				extra = true
			}
		}
	}
	return extra, mm
}

// appendKeysWhere writes one entry per block holding the block's keys that
// are multimodal (mm) or not (!mm); multimodal keys as TensorRT-LLM's
// {"type": "mm_key", "hash", "start_offset"} maps. A block without any is
// nil in extra_keys (a list of optional tuples) and an empty list in
// mm_keys, which TensorRT-LLM declares as a list of lists and fills with an
// empty one for a text-only block (kv_cache_events.py, drain_events).
func appendKeysWhere(dst []byte, keys [][]ExtraKey, mm bool) []byte {
	dst = appendArrayHeader(dst, len(keys))
	for _, block := range keys {
		n := 0
		for _, k := range block {
			if (k.Kind == ExtraKeyMM) == mm {
				n++
			}
		}
		if n == 0 && !mm {
			dst = append(dst, 0xc0)
			continue
		}
		dst = appendArrayHeader(dst, n)
		for _, k := range block {
			if !mm && k.Kind != ExtraKeyMM {
				dst = appendKey(dst, k)
			}
			if !mm || k.Kind != ExtraKeyMM {
				continue
			}
			dst = appendMapHeader(dst, 3)
			dst = appendStr(dst, "type")
			dst = appendStr(dst, "mm_key")
			dst = appendStr(dst, "hash")
			dst = appendStr(dst, k.Value)
			dst = appendStr(dst, "start_offset")
			dst = appendInt(dst, k.Offset)
		}
	}
	return dst
}
