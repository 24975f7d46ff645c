package wire

import "encoding/hex"

// maxInterned bounds the decoder's string-intern table; when it is full the
// table is emptied and refilled, so memory stays bounded whatever the input.
const (
	maxInterned    = 4096
	maxInternedLen = 256
)

// Decoder decodes KV-event batches of every vLLM and SGLang generation (array
// or map events, in any mix) into a reusable Batch. It is not safe for
// concurrent use: give each worker its own. A Decoder keeps a small intern
// table so that repeated strings (media, kinds, LoRA names, salts) do not
// allocate.
type Decoder struct {
	lim  Limits
	strs map[string]string
	hex  []byte // scratch for hex-encoding extra keys
}

// NewDecoder returns a Decoder enforcing l (zero fields take the defaults).
func NewDecoder(l Limits) *Decoder {
	d := &Decoder{lim: l.withDefaults(), strs: make(map[string]string, 64)}
	d.preload()
	return d
}

func (d *Decoder) preload() {
	for _, s := range []string{
		"GPU", "CPU", "CPU_PINNED", "STORAGE", "DISK", "EXTERNAL",
		"full_attention", "mla_attention", "sink_full_attention", "sliding_window",
		"sliding_window_mla", "mamba", "chunked_local_attention", "encoder_only_attention",
		"cross_attention", "unknown",
	} {
		d.strs[s] = s
	}
}

// intern returns b as a string, without allocating when it was seen before.
func (d *Decoder) intern(b []byte) string {
	if s, ok := d.strs[string(b)]; ok {
		return s
	}
	s := string(b)
	if len(b) <= maxInternedLen {
		if len(d.strs) >= maxInterned {
			clear(d.strs)
			d.preload()
		}
		d.strs[s] = s
	}
	return s
}

// internHex returns the lower-case hex of b, interned.
func (d *Decoder) internHex(b []byte) string {
	d.hex = hex.AppendEncode(d.hex[:0], b)
	return d.intern(d.hex)
}

// Decode decodes one msgpack KVEventBatch payload into b, replacing its
// content. It accepts the outer batch as an array of 2 or more elements
// ([ts, events, dp_rank], extra elements ignored) or as a map with keys
// "ts", "events" and "data_parallel_rank"/"attn_dp_rank"; events as
// positional arrays (every legacy length) or maps keyed by field name.
//
// On error Decode returns a *DecodeError (wrapping ErrTruncated,
// ErrMalformed or ErrLimit) and leaves b empty, so nothing from a bad
// payload can be applied. With a reused b, Decode does not allocate in
// steady state.
func (d *Decoder) Decode(payload []byte, b *Batch) error {
	b.Reset()
	if len(payload) > d.lim.MaxPayloadBytes {
		return &DecodeError{Err: ErrLimit, Field: "payload", Limit: limitPayloadBytes,
			Value: len(payload), Max: d.lim.MaxPayloadBytes}
	}
	r := reader{b: payload}
	c, ok := r.peek("batch")
	switch {
	case !ok:
	case isArray(c):
		d.arrayBatch(&r, b)
	case isMap(c):
		d.mapBatch(&r, b)
	default:
		r.fail(ErrMalformed, "batch")
	}
	if r.err == nil && r.p != len(payload) {
		r.fail(ErrMalformed, "trailing bytes")
	}
	if r.err != nil {
		b.Reset()
		return r.err
	}
	return nil
}

// arrayBatch decodes [ts, events], [ts, events, dp_rank] or vLLM's newest
// [ts, events, dp_rank, publisher_id, ...].
func (d *Decoder) arrayBatch(r *reader, b *Batch) {
	n := r.arrayLen("batch")
	if n < 0 {
		return
	}
	if n < 2 {
		r.fail(ErrMalformed, "batch")
		return
	}
	b.TS = r.float("ts")
	d.events(r, b)
	if n >= 3 {
		d.dpRank(r, b)
	}
	if n >= 4 {
		publisherID(r, b)
	}
	for i := 4; i < n && r.err == nil; i++ {
		r.skip("batch")
	}
}

// mapBatch decodes the map-shaped outer batch {"ts", "events",
// "data_parallel_rank"} of one unsettled vLLM revision (golden vector V9),
// with "publisher_id" when that revision's struct gains it.
func (d *Decoder) mapBatch(r *reader, b *Batch) {
	n := r.mapLen("batch")
	sawEvents := false
	for i := 0; i < n && r.err == nil; i++ {
		c, _ := r.peek("batch key")
		if !isStr(c) {
			r.skip("batch key")
			r.skip("batch")
			continue
		}
		switch string(r.strBytes("batch key")) {
		case "ts":
			b.TS = r.float("ts")
		case "events":
			b.Events, b.arena, b.UnknownEvents = b.Events[:0], b.arena[:0], 0
			d.events(r, b)
			sawEvents = true
		case "data_parallel_rank", "attn_dp_rank":
			d.dpRank(r, b)
		case "publisher_id":
			publisherID(r, b)
		default:
			r.skip("batch")
		}
	}
	if r.err == nil && !sawEvents {
		r.fail(ErrMalformed, "events")
	}
}

func (d *Decoder) dpRank(r *reader, b *Batch) {
	if r.nextNil() {
		b.HasDPRank = false
		return
	}
	b.DPRank = r.int64Val("data_parallel_rank")
	b.HasDPRank = r.err == nil
}

func (d *Decoder) events(r *reader, b *Batch) {
	n := r.arrayLen("events")
	if n < 0 {
		return
	}
	if n > d.lim.MaxEventsPerBatch {
		r.failLimit("events", limitEvents, n, d.lim.MaxEventsPerBatch)
		return
	}
	b.reserveEvents(min(n, r.remaining()/minEventBytes))
	for i := 0; i < n && r.err == nil; i++ {
		d.event(r, b)
	}
}
