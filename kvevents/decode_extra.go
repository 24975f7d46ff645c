package kvevents

// extraKeys decodes extra_keys: nil, or one entry per block, each nil or a
// list of keys. Key forms (spec/wire.md §2.5 rule 7): a string; a 2-array
// [identifier string, offset int] (multimodal); bytes (prompt embeddings);
// anything else is kept opaque (hex of its raw msgpack bytes).
func (d *Decoder) extraKeys(r *reader, e *Event) {
	e.ExtraKeys = e.ExtraKeys[:0]
	if r.nextNil() {
		return
	}
	n := r.arrayLen("extra_keys")
	if n < 0 {
		return
	}
	if n > d.lim.MaxHashesPerEvent {
		r.failLimit("extra_keys", LimitHashes, n, d.lim.MaxHashesPerEvent)
		return
	}
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
			for j := 0; j < m && r.err == nil; j++ {
				keys = append(keys, d.extraKey(r))
			}
		}
		e.ExtraKeys[i] = keys
	}
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
