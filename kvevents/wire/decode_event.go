package wire

import "encoding/binary"

// field identifies an event field independently of its wire position.
type field uint8

const (
	fSkip field = iota
	fHashes
	fParent
	fTokens
	fBlockSize
	fLoRAID
	fMedium
	fLoRANameOrMeta // positional [7]: vLLM lora_name (str/nil) or SGLang metadata (map)
	fExtraKeys
	fGroup
	fKind
	fWindow
	fMetadata
	fLocality  // map events only: vLLM's snapshot revision and TensorRT-LLM
	fOwnership // map events only
	fSession   // map events only
	fMMKeys    // TensorRT-LLM's mm_keys, merged into ExtraKeys
	fCacheSalt // SGLang's map events: cache_salt of BlockStored itself
	fMMInfos   // Dynamo's block_mm_infos, merged into ExtraKeys
)

// Positional layouts of vLLM's legacy array events, by index; index 0 is the
// tag. Newer vLLM releases appended fields at the end (medium, LoRA name,
// extra keys, cache group, attention kind and window), so elements past the
// end of a table are ignored and missing trailing ones stay nil. The fields
// added after events became maps (locality, ownership, session_id) have no
// position: vLLM writes them only in maps, SGLang's vLLM-aligned layout
// writes locality and ownership as nils, and other engines append their own
// trailing fields there (ATOM's token_offset). One trailing element is
// read: a map past a BlockStored's positions is SGLang's metadata.
var (
	storedPositions = [...]field{fSkip, fHashes, fParent, fTokens, fBlockSize, fLoRAID,
		fMedium, fLoRANameOrMeta, fExtraKeys, fGroup, fKind, fWindow}
	removedPositions = [...]field{fSkip, fHashes, fMedium, fGroup}
)

func eventType(tag []byte) EventType {
	switch string(tag) {
	case tagBlockStored:
		return EventBlockStored
	case tagBlockRemoved:
		return EventBlockRemoved
	case tagAllBlocksCleared:
		return EventAllBlocksCleared
	}
	return EventUnknown
}

// fieldByName maps a map-event key to its field (fSkip for unknown keys).
func fieldByName(k []byte) field {
	switch string(k) {
	case "block_hashes":
		return fHashes
	case "parent_block_hash":
		return fParent
	case "token_ids":
		return fTokens
	case "block_size":
		return fBlockSize
	case "lora_id":
		return fLoRAID
	case "medium":
		return fMedium
	case "lora_name":
		return fLoRANameOrMeta
	case "extra_keys":
		return fExtraKeys
	case "group_idx":
		return fGroup
	case "kv_cache_spec_kind":
		return fKind
	case "kv_cache_spec_sliding_window":
		return fWindow
	case "metadata":
		return fMetadata
	case "locality":
		return fLocality
	case "ownership":
		return fOwnership
	case "session_id":
		return fSession
	case "mm_keys":
		return fMMKeys
	case "cache_salt":
		return fCacheSalt
	case "block_mm_infos":
		return fMMInfos
	}
	return fSkip
}

// event decodes one event into a new slot of b.Events; an event of unknown
// type gives its slot back and is counted in b.UnknownEvents.
func (d *Decoder) event(r *reader, b *Batch) {
	e := b.nextEvent()
	c, ok := r.peek("event")
	switch {
	case !ok:
	case isArray(c):
		d.arrayEvent(r, b, e)
	case isMap(c):
		d.mapEvent(r, b, e)
	default:
		r.fail(ErrMalformed, "event")
	}
	if e.Type == EventUnknown {
		b.Events = b.Events[:len(b.Events)-1]
		b.UnknownEvents++
		return
	}
	if e.CacheSalt != "" {
		dropSaltMirror(e)
	}
}

// sglangSaltPrefix is the prefix of the extra key into which SGLang's
// vLLM-aligned layout mirrors a store's cache_salt (Dynamo's
// DYNAMO_CACHE_SALT_PREFIX, which its router strips).
const sglangSaltPrefix = "dynamo-cache-salt:"

// dropSaltMirror removes from e's extra keys the string key
// "dynamo-cache-salt:<salt>" that SGLang writes beside its metadata salt:
// the salt is Event.CacheSalt already, keyed on the chain's first block
// only, where a mirror left in extra_keys would key every salted store
// (a child's too) with a prefixed salt no request carries.
func dropSaltMirror(e *Event) {
	for i, keys := range e.ExtraKeys {
		kept := keys[:0]
		for _, k := range keys {
			v := k.Value
			if k.Kind == ExtraKeyString && len(v) == len(sglangSaltPrefix)+len(e.CacheSalt) &&
				v[:len(sglangSaltPrefix)] == sglangSaltPrefix && v[len(sglangSaltPrefix):] == e.CacheSalt {
				continue
			}
			kept = append(kept, k)
		}
		e.ExtraKeys[i] = kept
	}
}

// arrayEvent decodes a positional event: [tag, field1, field2, ...].
func (d *Decoder) arrayEvent(r *reader, b *Batch, e *Event) {
	n := r.arrayLen("event")
	if n < 0 {
		return
	}
	if n == 0 {
		r.fail(ErrMalformed, "event tag")
		return
	}
	e.Type = eventType(r.strBytes("event tag"))
	var positions []field
	switch e.Type {
	case EventBlockStored:
		positions = storedPositions[:]
	case EventBlockRemoved:
		positions = removedPositions[:]
	}
	for i := 1; i < n && r.err == nil; i++ {
		f := fSkip
		switch {
		case i < len(positions):
			f = positions[i]
			if f == fGroup && e.Type == EventBlockStored {
				// Dynamo's positional producers put block_mm_infos
				// (a list) where vLLM has group_idx (an integer).
				if c, ok := r.peek("event"); ok && isArray(c) {
					f = fMMInfos
				}
			}
		case e.Type == EventBlockStored && i >= len(storedPositions):
			// SGLang's vLLM-aligned layout parks its metadata map
			// {"cache_salt": …} past every vLLM position (after its
			// locality and ownership); a trailing map is that metadata,
			// any other trailing element is skipped.
			if c, ok := r.peek("event"); ok && isMap(c) {
				f = fMetadata
			}
		}
		d.field(r, b, e, f)
	}
}

// mapEvent decodes a map event {"type": tag, name: value, ...}. Keys may
// come in any order; unknown keys are skipped, missing ones stay nil.
func (d *Decoder) mapEvent(r *reader, b *Batch, e *Event) {
	n := r.mapLen("event")
	for i := 0; i < n && r.err == nil; i++ {
		c, _ := r.peek("event key")
		if !isStr(c) {
			r.skip("event key")
			r.skip("event")
			continue
		}
		k := r.strBytes("event key")
		if string(k) == "type" {
			e.Type = eventType(r.strBytes("event tag"))
			continue
		}
		d.field(r, b, e, fieldByName(k))
	}
}

// field decodes one field value into e.
func (d *Decoder) field(r *reader, b *Batch, e *Event, f field) {
	switch f {
	case fSkip:
		r.skip("event")
	case fHashes:
		d.hashes(r, b, e)
	case fParent:
		if r.nextNil() {
			e.HasParent, e.RawParent = false, nil
			return
		}
		v, raw, bin, neg := r.hash("parent_block_hash")
		e.ParentHash, e.HasParent = v, r.err == nil
		e.SignedHashes = e.SignedHashes || neg
		e.RawParent = nil
		if bin {
			e.RawParent = b.keep(raw)
		}
	case fTokens:
		d.tokens(r, e)
	case fBlockSize:
		if !r.nextNil() {
			e.BlockSize = r.intVal("block_size")
		}
	case fLoRAID:
		if !r.nextNil() {
			e.LoRAID = r.int64Val("lora_id")
			e.HasLoRAID = r.err == nil
		}
	case fMedium:
		e.Medium = d.optString(r, "medium")
	case fLoRANameOrMeta:
		if c, ok := r.peek("lora_name"); ok && isMap(c) {
			d.metadata(r, e)
			return
		}
		e.LoRAName = d.optString(r, "lora_name")
	case fExtraKeys:
		d.extraKeys(r, e)
	case fGroup:
		if !r.nextNil() {
			e.Group = r.intVal("group_idx")
			e.HasGroup = r.err == nil
		}
	case fKind:
		e.Kind = d.optString(r, "kv_cache_spec_kind")
	case fWindow:
		if !r.nextNil() {
			e.SlidingWindow = r.int64Val("kv_cache_spec_sliding_window")
			e.HasSlidingWindow = r.err == nil
		}
	case fMetadata:
		d.metadata(r, e)
	case fLocality:
		e.Locality = d.lenientString(r, "locality")
	case fOwnership:
		e.Ownership = d.lenientString(r, "ownership")
	case fSession:
		e.SessionID = d.lenientString(r, "session_id")
	case fMMKeys:
		d.mmKeys(r, e)
	case fCacheSalt:
		e.CacheSalt = d.optString(r, "cache_salt")
	case fMMInfos:
		d.blockMMInfos(r, e)
	}
}

// optString reads a string or nil ("" for nil), interned.
func (d *Decoder) optString(r *reader, fieldName string) string {
	if r.nextNil() {
		return ""
	}
	s := r.strBytes(fieldName)
	if r.err != nil {
		return ""
	}
	return d.intern(s)
}

// lenientString reads a string, or skips any other value ("" for it): the
// fields the index does not key on (locality, ownership, session_id) never
// cost the batch when an engine sends them in another form.
func (d *Decoder) lenientString(r *reader, fieldName string) string {
	if c, ok := r.peek(fieldName); ok && isStr(c) {
		return d.intern(r.strBytes(fieldName))
	}
	r.skip(fieldName)
	return ""
}

// keep copies raw bin bytes into the batch arena, so the event does not
// alias the caller's payload buffer.
func (b *Batch) keep(raw []byte) []byte {
	if len(raw) == 0 {
		return emptyBin
	}
	start := len(b.arena)
	b.arena = append(b.arena, raw...)
	return b.arena[start:len(b.arena):len(b.arena)]
}

// emptyBin is the non-nil value kept for an empty bin hash.
var emptyBin = []byte{}

func (d *Decoder) hashes(r *reader, b *Batch, e *Event) {
	e.BlockHashes, e.RawHashes = e.BlockHashes[:0], e.RawHashes[:0]
	if r.nextNil() {
		return
	}
	n := r.arrayLen("block_hashes")
	if n < 0 {
		return
	}
	if n > d.lim.MaxHashesPerEvent {
		r.failLimit("block_hashes", limitHashes, n, d.lim.MaxHashesPerEvent)
		return
	}
	if cap(e.BlockHashes) < n {
		e.BlockHashes = make([]uint64, 0, n)
	}
	anyRaw := false
	for i := 0; i < n; i++ {
		v, raw, bin, neg := r.hash("block_hashes")
		if r.err != nil {
			return
		}
		e.BlockHashes = append(e.BlockHashes, v)
		e.SignedHashes = e.SignedHashes || neg
		if bin && !anyRaw {
			anyRaw = true
			if cap(e.RawHashes) < n {
				e.RawHashes = make([][]byte, 0, n) // n was checked against the bytes remaining
			}
			for j := 0; j < i; j++ {
				e.RawHashes = append(e.RawHashes, nil)
			}
		}
		if anyRaw {
			var kept []byte
			if bin {
				kept = b.keep(raw)
			}
			e.RawHashes = append(e.RawHashes, kept)
		}
	}
}

// tokens decodes token_ids into e.TokenIDs. An element that is not an
// integer in [0, 2³²) is skipped and flags the event (InvalidTokens)
// instead of failing the whole batch.
func (d *Decoder) tokens(r *reader, e *Event) {
	e.TokenIDs = e.TokenIDs[:0]
	if r.nextNil() {
		return
	}
	n := r.arrayLen("token_ids")
	if n < 0 {
		return
	}
	if n > d.lim.MaxTokensPerEvent {
		r.failLimit("token_ids", limitTokens, n, d.lim.MaxTokensPerEvent)
		return
	}
	if cap(e.TokenIDs) < n {
		e.TokenIDs = make([]uint32, 0, n)
	}
	toks := e.TokenIDs[:n]
	k := 0
	b := r.b
	p := r.p
	for i := 0; i < n; i++ {
		// Fast path: the forms msgspec uses for token IDs. A plain switch
		// measured ~3× faster here than a branch-free table decode: the
		// predicted branches break the load→advance dependency chain.
		if p+5 <= len(b) {
			switch c := b[p]; {
			case c <= 0x7f:
				toks[k] = uint32(c)
				k++
				p++
				continue
			case c == 0xcd:
				toks[k] = uint32(b[p+1])<<8 | uint32(b[p+2])
				k++
				p += 3
				continue
			case c == 0xce:
				toks[k] = binary.BigEndian.Uint32(b[p+1:])
				k++
				p += 5
				continue
			case c == 0xcc:
				toks[k] = uint32(b[p+1])
				k++
				p += 2
				continue
			}
		}
		// Slow path: the last bytes of the payload, signed or 64-bit forms,
		// and non-integers.
		r.p = p
		v, neg, ok := r.intBits("token_ids")
		switch {
		case ok && !neg && v <= 0xffffffff:
			toks[k] = uint32(v)
			k++
		case ok:
			flagInvalidToken(e, i)
		case r.err.Err == ErrTruncated:
			return
		default:
			r.err = nil // not an integer: skip the element, flag the event
			r.skip("token_ids")
			if r.err != nil {
				return
			}
			flagInvalidToken(e, i)
		}
		p = r.p
	}
	r.p = p
	e.TokenIDs = toks[:k]
}

// flagInvalidToken records that token_ids element i is not a token,
// keeping the index of the first such element.
func flagInvalidToken(e *Event, i int) {
	if !e.InvalidTokens {
		e.InvalidTokens, e.InvalidTokenAt = true, i
	}
}

// metadata decodes SGLang's BlockStoredWithMetadata map {"cache_salt": str}.
func (d *Decoder) metadata(r *reader, e *Event) {
	if r.nextNil() {
		return
	}
	n := r.mapLen("metadata")
	for i := 0; i < n && r.err == nil; i++ {
		c, _ := r.peek("metadata key")
		if !isStr(c) {
			r.skip("metadata key")
			r.skip("metadata")
			continue
		}
		if string(r.strBytes("metadata key")) == "cache_salt" {
			e.CacheSalt = d.optString(r, "cache_salt")
			continue
		}
		r.skip("metadata")
	}
}
