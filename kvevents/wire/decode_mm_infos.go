package wire

import "encoding/binary"

// blockMMInfos decodes NVIDIA Dynamo's block_mm_infos, the per-block
// multimodal field its TensorRT-LLM relay (ZmqKvEventPublisher in
// components/src/dynamo/trtllm/publisher.py, the stream Dynamo's KV event
// consolidator subscribes to) writes into vLLM-shaped map events: nil, or
// one entry per block, each nil or
//
//	{"mm_objects": [{"mm_hash": <uint64>, "offsets": [[start, end], ...]}, ...]}
//
// Each object joins the block's ExtraKeys as an ExtraKeyMM whose Value is
// the mm_hash as 16 lower-case hex digits (Dynamo takes it from the first
// 16 hex digits of the engine's item digest) and whose Offset is 0: Dynamo
// writes the offsets empty and keys its blocks on mm_hash alone
// (lib/kv-router/src/zmq_wire.rs), so they are skipped. The keys come after
// the block's extra_keys when the event carried both, so a multimodal
// block never matches a text-only block or one of another item. An entry
// of another shape (no mm_objects list, an object without an integer
// mm_hash) is read as an extra_keys element would be (a typed or opaque
// key), which keeps that block apart as well.
func (d *Decoder) blockMMInfos(r *reader, e *Event) {
	if r.nextNil() {
		return
	}
	n := r.arrayLen("block_mm_infos")
	if n < 0 {
		return
	}
	if n > d.lim.MaxHashesPerEvent {
		r.failLimit("block_mm_infos", limitHashes, n, d.lim.MaxHashesPerEvent)
		return
	}
	reserveKeySlots(e, n)
	for i := 0; i < n && r.err == nil; i++ {
		extraKeySlot(e, i)
		if r.nextNil() {
			continue
		}
		start, kept := r.p, len(e.ExtraKeys[i])
		if d.mmInfo(r, e, i) || r.err != nil {
			continue
		}
		// Not the mm_objects shape: read it as an extra key instead.
		r.p, e.ExtraKeys[i] = start, e.ExtraKeys[i][:kept]
		e.ExtraKeys[i] = append(e.ExtraKeys[i], d.extraKey(r))
	}
}

// mmInfo decodes one block's {"mm_objects": [...]} into e.ExtraKeys[i]. It
// reports false (without error, leaving r mid-entry) when the entry has
// another shape; the caller then rewinds.
func (d *Decoder) mmInfo(r *reader, e *Event, i int) bool {
	if c, ok := r.peek("block_mm_infos entry"); !ok || !isMap(c) {
		return false
	}
	found := false
	for n := r.mapLen("block_mm_infos entry"); n > 0 && r.err == nil; n-- {
		if c, ok := r.peek("block_mm_infos entry"); !ok || !isStr(c) {
			return false
		}
		if string(r.strBytes("block_mm_infos entry")) != "mm_objects" {
			r.skip("block_mm_infos entry")
			continue
		}
		if found || !d.mmObjects(r, e, i) {
			return false
		}
		found = true
	}
	return found && r.err == nil
}

// mmObjects decodes an mm_objects list into e.ExtraKeys[i], false when an
// element is not a map with an integer mm_hash.
func (d *Decoder) mmObjects(r *reader, e *Event, i int) bool {
	if c, ok := r.peek("mm_objects"); !ok || !isArray(c) {
		return false
	}
	for n := r.arrayLen("mm_objects"); n > 0 && r.err == nil; n-- {
		if c, ok := r.peek("mm_objects"); !ok || !isMap(c) {
			return false
		}
		var (
			hash uint64
			has  bool
		)
		for m := r.mapLen("mm_objects"); m > 0 && r.err == nil; m-- {
			if c, ok := r.peek("mm_objects"); !ok || !isStr(c) {
				return false
			}
			if string(r.strBytes("mm_objects")) != "mm_hash" {
				r.skip("mm_objects") // offsets and any later field
				continue
			}
			v, _, ok := r.intBits("mm_hash")
			if !ok && r.err.Err != ErrTruncated {
				r.err = nil // not an integer: another shape, not a failure
			}
			if !ok || has {
				return false
			}
			hash, has = v, true
		}
		if !has {
			return false
		}
		e.ExtraKeys[i] = append(e.ExtraKeys[i], ExtraKey{Kind: ExtraKeyMM, Value: d.internHash(hash)})
	}
	return r.err == nil
}

// internHash returns v as 16 lower-case hex digits (big-endian), interned.
func (d *Decoder) internHash(v uint64) string {
	var buf [8]byte
	binary.BigEndian.PutUint64(buf[:], v)
	return d.internHex(buf[:])
}

// extraKeySlot makes e.ExtraKeys hold slot i, reusing the inner slice that
// previously occupied it, for the fields that merge into the keys of
// extra_keys (mm_keys, block_mm_infos).
func extraKeySlot(e *Event, i int) {
	for len(e.ExtraKeys) <= i {
		if n := len(e.ExtraKeys); n < cap(e.ExtraKeys) {
			e.ExtraKeys = e.ExtraKeys[:n+1]
			e.ExtraKeys[n] = e.ExtraKeys[n][:0]
		} else {
			e.ExtraKeys = append(e.ExtraKeys, nil)
		}
	}
}

// reserveKeySlots makes room for n blocks in e.ExtraKeys in one
// allocation (n was checked against the bytes remaining), keeping the key
// slices of the blocks that previously occupied the slots: an entry may
// take one byte (nil), and growing the slice entry by entry copied it over
// and over.
func reserveKeySlots(e *Event, n int) {
	if n <= cap(e.ExtraKeys) {
		return
	}
	old := e.ExtraKeys[:cap(e.ExtraKeys)]
	grown := make([][]ExtraKey, n)
	copy(grown, old)
	e.ExtraKeys = grown[:len(e.ExtraKeys)]
}
