package wire

// extraKeys decodes extra_keys: nil, or one entry per block, each nil or a
// list of keys. Key forms: a string; a 2-array [identifier string, offset
// int] (multimodal); bytes (prompt embeddings); a typed map (see typedKey);
// anything else is kept opaque (hex of its raw msgpack bytes).
//
// A map event may name mm_keys or block_mm_infos before extra_keys; the
// multimodal keys already merged then follow the block's extra keys, as
// they do in the usual order, instead of being lost.
func (d *Decoder) extraKeys(r *reader, e *Event) {
	if len(e.ExtraKeys) > 0 {
		merged := e.ExtraKeys
		e.ExtraKeys = nil
		d.extraKeys(r, e)
		for i, keys := range merged {
			extraKeySlot(e, i)
			e.ExtraKeys[i] = append(e.ExtraKeys[i], keys...)
		}
		return
	}
	e.ExtraKeys = e.ExtraKeys[:0]
	if r.nextNil() {
		return
	}
	n := r.arrayLen("extra_keys")
	if n < 0 {
		return
	}
	if n > d.lim.MaxHashesPerEvent {
		r.failLimit("extra_keys", limitHashes, n, d.lim.MaxHashesPerEvent)
		return
	}
	reserveKeySlots(e, n)
	for i := 0; i < n && r.err == nil; i++ {
		// Reuse the inner slice that previously occupied this slot.
		if len(e.ExtraKeys) < cap(e.ExtraKeys) {
			e.ExtraKeys = e.ExtraKeys[:len(e.ExtraKeys)+1]
		} else {
			e.ExtraKeys = append(e.ExtraKeys, nil)
		}
		keys := e.ExtraKeys[i][:0]
		if !r.nextNil() {
			m := r.arrayLen("extra_keys entry")
			keys = growKeys(keys, m)
			for j := 0; j < m && r.err == nil; j++ {
				keys = append(keys, d.extraKey(r))
			}
		}
		e.ExtraKeys[i] = keys
	}
}

// mmKeys decodes TensorRT-LLM's mm_keys: nil, or one entry per block, each
// nil or a list of {"type": "mm_key", "hash", "start_offset", "uuid"} maps.
// Each key joins the block's ExtraKeys (as ExtraKeyMM: the hash and the
// offset of the segment in the block), after the block's extra_keys when
// the event carried both, so a multimodal block never matches a text-only
// one.
func (d *Decoder) mmKeys(r *reader, e *Event) {
	if r.nextNil() {
		return
	}
	n := r.arrayLen("mm_keys")
	if n < 0 {
		return
	}
	if n > d.lim.MaxHashesPerEvent {
		r.failLimit("mm_keys", limitHashes, n, d.lim.MaxHashesPerEvent)
		return
	}
	reserveKeySlots(e, n)
	for i := 0; i < n && r.err == nil; i++ {
		extraKeySlot(e, i)
		if r.nextNil() {
			continue
		}
		m := r.arrayLen("mm_keys entry")
		e.ExtraKeys[i] = growKeys(e.ExtraKeys[i], m)
		for j := 0; j < m && r.err == nil; j++ {
			e.ExtraKeys[i] = append(e.ExtraKeys[i], d.extraKey(r))
		}
	}
}

// growKeys makes room in keys for the n keys an array header claims, in
// one allocation: n was checked against the bytes remaining, and a key may
// take one byte on the wire, so growing the slice key by key would copy
// it over and over (many times the payload's size in all).
func growKeys(keys []ExtraKey, n int) []ExtraKey {
	if n <= cap(keys)-len(keys) {
		return keys
	}
	grown := make([]ExtraKey, len(keys), len(keys)+n)
	copy(grown, keys)
	return grown
}

// extraKey decodes one key of a block's extra_keys list.
func (d *Decoder) extraKey(r *reader) ExtraKey {
	c, ok := r.peek("extra key")
	if !ok {
		return ExtraKey{}
	}
	switch {
	case isStr(c):
		return ExtraKey{Kind: ExtraKeyString, Value: d.intern(r.strBytes("extra key"))}
	case isBin(c):
		raw := r.binBytes("extra key")
		if r.err != nil {
			return ExtraKey{}
		}
		return ExtraKey{Kind: ExtraKeyBytes, Value: d.internHex(raw)}
	case isMap(c):
		return d.typedKey(r)
	case isArray(c):
		start := r.p
		if k, ok := d.mmKey(r); ok {
			return k
		}
		if r.err != nil {
			return ExtraKey{}
		}
		r.p = start
	}
	start := r.p
	r.skip("extra key")
	if r.err != nil {
		return ExtraKey{}
	}
	return ExtraKey{Kind: ExtraKeyOpaque, Value: d.internHex(r.b[start:r.p])}
}

// mmKey tries the [identifier, offset] form. ok is false (without error)
// when the array has another shape; the caller then rewinds.
func (d *Decoder) mmKey(r *reader) (ExtraKey, bool) {
	if r.arrayLen("extra key") != 2 {
		return ExtraKey{}, false
	}
	if c, ok := r.peek("extra key"); !ok || !isStr(c) {
		return ExtraKey{}, false
	}
	id := r.strBytes("extra key")
	c, ok := r.peek("extra key")
	if !ok || !(c <= 0x7f || c >= 0xe0 || (c >= 0xcc && c <= 0xd3)) {
		return ExtraKey{}, false
	}
	off := r.int64Val("extra key")
	if r.err != nil {
		// An integer out of int64 range: not the MM form.
		r.err = nil
		return ExtraKey{}, false
	}
	return ExtraKey{Kind: ExtraKeyMM, Value: d.intern(id), Offset: off}, true
}

// typedKey decodes a typed extra key, the msgpack map form some vLLM
// revisions publish instead of bare strings and tuples: a tagged union with
// the tag under "type" and, by tag,
//
//	"lora":          "name" (the adapter name)          → ExtraKeyLoRA
//	"mm":            "hash" (the item's identifier, a string or bytes) and
//	                 "block_offset" (offset of the item's first token from
//	                 the block start); "modality" is informative only → ExtraKeyMM
//	"cache_salt":    "salt"                              → ExtraKeySalt
//	"prompt_embeds": "hash" (bytes → ExtraKeyBytes, text → ExtraKeyString)
//	"legacy":        "value", an untyped key             → that key's meaning
//	"mm_key":        TensorRT-LLM's mm_keys entry: "hash" and
//	                 "start_offset"; "uuid" is informative only → ExtraKeyMM
//
// Keys may come in any order, unknown keys are ignored, and a few alternate
// field names seen in drafts are accepted ("lora_name", "identifier",
// "mm_hash", "offset", "start_offset", "cache_salt", "value"). A map that is none of these,
// or whose fields have the wrong types, is kept opaque like any unknown
// form, so it never matches a block without that key.
func (d *Decoder) typedKey(r *reader) ExtraKey {
	start := r.p
	n := r.mapLen("extra key")
	var (
		tag, name, hash []byte
		hashBin, bad    bool
		offset          int64
		hasOffset       bool
		legacyAt        = -1
	)
	str := func(dst *[]byte) {
		if c, ok := r.peek("extra key"); ok && isStr(c) {
			*dst = r.strBytes("extra key")
			return
		}
		bad = true
		r.skip("extra key")
	}
	for i := 0; i < n && r.err == nil; i++ {
		c, ok := r.peek("extra key")
		if !ok {
			break
		}
		if !isStr(c) {
			r.skip("extra key")
			r.skip("extra key")
			bad = true
			continue
		}
		switch string(r.strBytes("extra key")) {
		case "type":
			str(&tag)
		case "name", "lora_name", "salt", "cache_salt":
			str(&name)
		case "hash", "identifier", "mm_hash":
			if c, ok := r.peek("extra key"); ok && isBin(c) {
				hash, hashBin = r.binBytes("extra key"), true
			} else {
				str(&hash)
			}
		case "block_offset", "offset", "start_offset":
			c, ok := r.peek("extra key")
			if !ok || !(c <= 0x7f || c >= 0xe0 || (c >= 0xcc && c <= 0xd3)) {
				bad = true
				r.skip("extra key")
				continue
			}
			offset, hasOffset = r.int64Val("extra key"), true
			if r.err != nil {
				r.err, bad = nil, true // out of int64 range
			}
		case "value":
			legacyAt = r.p
			r.skip("extra key")
		default:
			r.skip("extra key")
		}
	}
	if r.err != nil {
		return ExtraKey{}
	}
	end := r.p
	k, ok := ExtraKey{}, !bad
	switch string(tag) {
	case "lora":
		k = ExtraKey{Kind: ExtraKeyLoRA, Value: d.intern(name)}
		ok = ok && len(name) > 0
	case "cache_salt":
		k = ExtraKey{Kind: ExtraKeySalt, Value: d.intern(name)}
		ok = ok && len(name) > 0
	case "mm", "mm_key": // vLLM's typed key; TensorRT-LLM's mm_keys entry
		k = ExtraKey{Kind: ExtraKeyMM, Value: d.intern(hash), Offset: offset}
		if hashBin {
			k.Value = d.internHex(hash)
		}
		ok = ok && len(hash) > 0 && hasOffset
	case "prompt_embeds":
		k = ExtraKey{Kind: ExtraKeyBytes, Value: d.internHex(hash)}
		if !hashBin {
			// A hash sent as text is keyed by that text (the hex of the
			// digest gives the same key as its bytes).
			k = ExtraKey{Kind: ExtraKeyString, Value: d.intern(hash)}
		}
		ok = ok && len(hash) > 0
	case "legacy":
		if ok = ok && legacyAt >= 0; ok {
			r.p = legacyAt
			if c, _ := r.peek("extra key"); isMap(c) {
				ok = false // a typed key inside a legacy one: keep it opaque
			} else {
				k = d.extraKey(r)
			}
			r.p = end
			if r.err != nil {
				return ExtraKey{}
			}
		}
	default:
		ok = false
	}
	if !ok {
		return ExtraKey{Kind: ExtraKeyOpaque, Value: d.internHex(r.b[start:end])}
	}
	return k
}
