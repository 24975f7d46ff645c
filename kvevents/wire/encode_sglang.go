package wire

// appendSGLangMapEvent writes e as current SGLang does: a msgspec tagged
// map of its own structs, "type" first, fields in declaration order, None
// defaults (medium, cache_salt, session_id) left out when unset and the
// fields without a default (parent_block_hash, lora_id) always written.
// Hashes are signed, as SGLang's int64 hashes are.
func appendSGLangMapEvent(dst []byte, e *Event) []byte {
	switch e.Type {
	case EventBlockStored:
		n := 6
		for _, present := range [...]bool{e.Medium != "", e.CacheSalt != "", e.SessionID != ""} {
			if present {
				n++
			}
		}
		dst = appendMapHeader(dst, n)
		dst = appendStr(dst, "type")
		dst = appendStr(dst, tagBlockStored)
		dst = appendStr(dst, "block_hashes")
		dst = appendHashes(dst, e, true)
		dst = appendStr(dst, "parent_block_hash")
		dst = appendParent(dst, e, true)
		dst = appendStr(dst, "token_ids")
		dst = appendTokens(dst, e.TokenIDs)
		dst = appendStr(dst, "block_size")
		dst = appendInt(dst, int64(e.BlockSize))
		dst = appendStr(dst, "lora_id")
		dst = appendOptInt(dst, e.LoRAID, e.HasLoRAID)
		dst = appendOmittable(dst, "medium", e.Medium)
		dst = appendOmittable(dst, "cache_salt", e.CacheSalt)
		dst = appendOmittable(dst, "session_id", e.SessionID)
	case EventBlockRemoved:
		n := 2
		if e.Medium != "" {
			n++
		}
		dst = appendMapHeader(dst, n)
		dst = appendStr(dst, "type")
		dst = appendStr(dst, tagBlockRemoved)
		dst = appendStr(dst, "block_hashes")
		dst = appendHashes(dst, e, true)
		dst = appendOmittable(dst, "medium", e.Medium)
	case EventAllBlocksCleared:
		dst = appendMapHeader(dst, 1)
		dst = appendStr(dst, "type")
		dst = appendStr(dst, tagAllBlocksCleared)
	}
	return dst
}
