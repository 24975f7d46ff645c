package wire

// AppendBatch appends the msgpack encoding of b in format f to dst and
// returns the extended slice. The bytes are identical to what the engine's
// own encoder (msgspec) writes for the same batch, so a Go publisher or a
// simulated engine is indistinguishable from the real one on the wire.
// Events of type EventUnknown are not written. An unknown f writes
// FormatVLLM. A batch with HasPublisherID is written in vLLM's newest
// layout by FormatVLLM ([ts, events, dp_rank, publisher_id]) and
// FormatVLLMMapBatch (a "publisher_id" key); the other formats have no
// identity and leave it out. AppendBatch allocates only when dst has to
// grow.
func AppendBatch(dst []byte, b *Batch, f Format) []byte {
	n := 0
	for i := range b.Events {
		if b.Events[i].Type != EventUnknown {
			n++
		}
	}
	withID := b.HasPublisherID && (f == FormatVLLM || f == FormatVLLMMapBatch)
	if f == FormatVLLMMapBatch {
		entries := 2
		if b.HasDPRank {
			entries++
		}
		if withID {
			entries++
		}
		dst = appendMapHeader(dst, entries)
		dst = appendStr(dst, "ts")
		dst = appendFloat(dst, b.TS)
		dst = appendStr(dst, "events")
	} else {
		n := 3
		if withID {
			n = 4
		}
		dst = appendArrayHeader(dst, n)
		dst = appendFloat(dst, b.TS)
	}
	dst = appendArrayHeader(dst, n)
	for i := range b.Events {
		e := &b.Events[i]
		switch f {
		case FormatVLLMLegacy:
			dst = appendLegacyEvent(dst, e)
		case FormatSGLang:
			dst = appendSGLangEvent(dst, e)
		case FormatTRTLLM:
			dst = appendTRTLLMEvent(dst, e)
		case FormatSGLangMap:
			dst = appendSGLangMapEvent(dst, e)
		default:
			dst = appendMapEvent(dst, e)
		}
	}
	switch {
	case f == FormatVLLMMapBatch:
		if b.HasDPRank {
			dst = appendStr(dst, "data_parallel_rank")
			dst = appendInt(dst, b.DPRank)
		}
		if withID {
			dst = appendStr(dst, "publisher_id")
		}
	case b.HasDPRank:
		dst = appendInt(dst, b.DPRank)
	default:
		dst = append(dst, 0xc0)
	}
	if withID {
		dst = appendBin(dst, b.PublisherID[:])
	}
	return dst
}

// appendStoredFields writes the eight fields every map BlockStored event
// begins with, in vLLM's and TensorRT-LLM's order: the type tag,
// block_hashes, parent_block_hash, token_ids, block_size, lora_id, medium
// and lora_name (the last three written even when unset, as None).
func appendStoredFields(dst []byte, e *Event) []byte {
	dst = appendStr(dst, "type")
	dst = appendStr(dst, tagBlockStored)
	dst = appendStr(dst, "block_hashes")
	dst = appendHashes(dst, e, e.SignedHashes)
	dst = appendStr(dst, "parent_block_hash")
	dst = appendParent(dst, e, e.SignedHashes)
	dst = appendStr(dst, "token_ids")
	dst = appendTokens(dst, e.TokenIDs)
	dst = appendStr(dst, "block_size")
	dst = appendInt(dst, int64(e.BlockSize))
	dst = appendStr(dst, "lora_id")
	dst = appendOptInt(dst, e.LoRAID, e.HasLoRAID)
	dst = appendStr(dst, "medium")
	dst = appendOptStr(dst, e.Medium)
	dst = appendStr(dst, "lora_name")
	dst = appendOptStr(dst, e.LoRAName)
	return dst
}

// appendMapEvent writes e as a current-vLLM map event.
func appendMapEvent(dst []byte, e *Event) []byte {
	switch e.Type {
	case EventBlockStored:
		n := 8
		for _, present := range [...]bool{len(e.ExtraKeys) > 0, e.HasGroup, e.Kind != "", e.HasSlidingWindow,
			e.Locality != "", e.Ownership != "", e.SessionID != ""} {
			if present {
				n++
			}
		}
		dst = appendMapHeader(dst, n)
		dst = appendStoredFields(dst, e)
		if len(e.ExtraKeys) > 0 {
			dst = appendStr(dst, "extra_keys")
			dst = appendExtraKeys(dst, e.ExtraKeys)
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
		dst = appendOmittable(dst, "ownership", e.Ownership)
		dst = appendOmittable(dst, "session_id", e.SessionID)
	case EventBlockRemoved:
		dst = appendBlockRemoved(dst, e, true)
	case EventAllBlocksCleared:
		dst = appendMapHeader(dst, 1)
		dst = appendStr(dst, "type")
		dst = appendStr(dst, tagAllBlocksCleared)
	}
	return dst
}

// appendBlockRemoved writes a BlockRemoved event as a map, as vLLM's
// publisher and (without ownership, which it does not have) TensorRT-LLM's
// write it: optional fields left out when unset.
func appendBlockRemoved(dst []byte, e *Event, ownership bool) []byte {
	n := 3
	for _, present := range [...]bool{e.HasGroup, e.Locality != "", ownership && e.Ownership != ""} {
		if present {
			n++
		}
	}
	dst = appendMapHeader(dst, n)
	dst = appendStr(dst, "type")
	dst = appendStr(dst, tagBlockRemoved)
	dst = appendStr(dst, "block_hashes")
	dst = appendHashes(dst, e, e.SignedHashes)
	dst = appendStr(dst, "medium")
	dst = appendOptStr(dst, e.Medium)
	if e.HasGroup {
		dst = appendStr(dst, "group_idx")
		dst = appendInt(dst, int64(e.Group))
	}
	dst = appendOmittable(dst, "locality", e.Locality)
	if ownership {
		dst = appendOmittable(dst, "ownership", e.Ownership)
	}
	return dst
}

// appendOmittable writes key: s unless s is empty (a None default msgspec
// omits).
func appendOmittable(dst []byte, key, s string) []byte {
	if s == "" {
		return dst
	}
	return appendStr(appendStr(dst, key), s)
}

// appendLegacyEvent writes e as a positional event of the last all-array
// vLLM schema.
func appendLegacyEvent(dst []byte, e *Event) []byte {
	switch e.Type {
	case EventBlockStored:
		dst = appendArrayHeader(dst, 12)
		dst = appendStr(dst, tagBlockStored)
		dst = appendHashes(dst, e, e.SignedHashes)
		dst = appendParent(dst, e, e.SignedHashes)
		dst = appendTokens(dst, e.TokenIDs)
		dst = appendInt(dst, int64(e.BlockSize))
		dst = appendOptInt(dst, e.LoRAID, e.HasLoRAID)
		dst = appendOptStr(dst, e.Medium)
		dst = appendOptStr(dst, e.LoRAName)
		if len(e.ExtraKeys) > 0 {
			dst = appendExtraKeys(dst, e.ExtraKeys)
		} else {
			dst = append(dst, 0xc0)
		}
		dst = appendOptInt(dst, int64(e.Group), e.HasGroup)
		dst = appendOptStr(dst, e.Kind)
		dst = appendOptInt(dst, e.SlidingWindow, e.HasSlidingWindow)
	case EventBlockRemoved:
		dst = appendArrayHeader(dst, 4)
		dst = appendStr(dst, tagBlockRemoved)
		dst = appendHashes(dst, e, e.SignedHashes)
		dst = appendOptStr(dst, e.Medium)
		dst = appendOptInt(dst, int64(e.Group), e.HasGroup)
	case EventAllBlocksCleared:
		dst = appendArrayHeader(dst, 1)
		dst = appendStr(dst, tagAllBlocksCleared)
	}
	return dst
}

// appendSGLangEvent writes e in SGLang's positional layout.
func appendSGLangEvent(dst []byte, e *Event) []byte {
	switch e.Type {
	case EventBlockStored:
		n := 7
		if e.CacheSalt != "" {
			n = 8
		}
		dst = appendArrayHeader(dst, n)
		dst = appendStr(dst, tagBlockStored)
		dst = appendHashes(dst, e, true)
		dst = appendParent(dst, e, true)
		dst = appendTokens(dst, e.TokenIDs)
		dst = appendInt(dst, int64(e.BlockSize))
		dst = appendOptInt(dst, e.LoRAID, e.HasLoRAID)
		dst = appendOptStr(dst, e.Medium)
		if e.CacheSalt != "" {
			dst = appendMapHeader(dst, 1)
			dst = appendStr(dst, "cache_salt")
			dst = appendStr(dst, e.CacheSalt)
		}
	case EventBlockRemoved:
		dst = appendArrayHeader(dst, 3)
		dst = appendStr(dst, tagBlockRemoved)
		dst = appendHashes(dst, e, true)
		dst = appendOptStr(dst, e.Medium)
	case EventAllBlocksCleared:
		dst = appendArrayHeader(dst, 1)
		dst = appendStr(dst, tagAllBlocksCleared)
	}
	return dst
}

func appendHashes(dst []byte, e *Event, signed bool) []byte {
	dst = appendArrayHeader(dst, len(e.BlockHashes))
	raw := len(e.RawHashes) == len(e.BlockHashes)
	for i, h := range e.BlockHashes {
		if raw && e.RawHashes[i] != nil {
			dst = appendBin(dst, e.RawHashes[i])
			continue
		}
		dst = appendHash(dst, h, signed)
	}
	return dst
}

func appendParent(dst []byte, e *Event, signed bool) []byte {
	switch {
	case !e.HasParent:
		return append(dst, 0xc0)
	case e.RawParent != nil:
		return appendBin(dst, e.RawParent)
	}
	return appendHash(dst, e.ParentHash, signed)
}

// appendHash writes a hash as msgspec writes the Python int it came from:
// unsigned for vLLM's int mode, two's-complement signed for SGLang.
func appendHash(dst []byte, h uint64, signed bool) []byte {
	if signed {
		return appendInt(dst, int64(h))
	}
	return appendUint(dst, h)
}

func appendTokens(dst []byte, toks []uint32) []byte {
	dst = appendArrayHeader(dst, len(toks))
	for _, t := range toks {
		dst = appendUint(dst, uint64(t))
	}
	return dst
}

func appendExtraKeys(dst []byte, keys [][]ExtraKey) []byte {
	dst = appendArrayHeader(dst, len(keys))
	for _, block := range keys {
		if len(block) == 0 {
			dst = append(dst, 0xc0)
			continue
		}
		dst = appendKeyList(dst, block)
	}
	return dst
}

// appendKeyList writes one block's extra keys as a list.
func appendKeyList(dst []byte, block []ExtraKey) []byte {
	dst = appendArrayHeader(dst, len(block))
	for _, k := range block {
		dst = appendKey(dst, k)
	}
	return dst
}

// appendKey writes one extra key in the form it came in.
func appendKey(dst []byte, k ExtraKey) []byte {
	switch k.Kind {
	case ExtraKeyMM:
		dst = appendArrayHeader(dst, 2)
		dst = appendStr(dst, k.Value)
		dst = appendInt(dst, k.Offset)
	case ExtraKeyBytes:
		dst = appendHexBin(dst, k.Value)
	case ExtraKeyOpaque:
		dst = appendHexRaw(dst, k.Value)
	case ExtraKeyLoRA, ExtraKeySalt:
		// The typed form ({"type": …, field: value}).
		tag, field := "lora", "name"
		if k.Kind == ExtraKeySalt {
			tag, field = "cache_salt", "salt"
		}
		dst = append(dst, 0x82)
		dst = appendStr(dst, "type")
		dst = appendStr(dst, tag)
		dst = appendStr(dst, field)
		dst = appendStr(dst, k.Value)
	default:
		dst = appendStr(dst, k.Value)
	}
	return dst
}
