package wire

// publisherIDLen is the size of vLLM's publisher identity (uuid4().bytes).
const publisherIDLen = 16

// publisherID decodes the publisher_id element: a bin of exactly 16 bytes
// is the identity; nil, or anything else (another engine's trailing field,
// a future form) is skipped and leaves the batch without identity, so the
// stream falls back to the checks it makes for engines without one instead
// of losing the batch.
func publisherID(r *reader, b *Batch) {
	b.PublisherID, b.HasPublisherID = [16]byte{}, false
	if c, ok := r.peek("publisher_id"); !ok || !isBin(c) {
		r.skip("publisher_id")
		return
	}
	raw := r.binBytes("publisher_id")
	if r.err != nil || len(raw) != publisherIDLen {
		return
	}
	copy(b.PublisherID[:], raw)
	b.HasPublisherID = true
}

// Header is what a subscriber needs of a batch before it is sequenced: its
// publisher identity and how many events it holds (0: a heartbeat).
type Header struct {
	// PublisherID and HasPublisherID are as in Batch.
	PublisherID    [16]byte
	HasPublisherID bool
	// Events is the length of the batch's events array.
	Events int
}

// PeekHeader reads the header of a KV-event payload without decoding its
// events: the receiver of a stream calls it on every message to see a
// publisher restart (a new identity) and a heartbeat (no events) before the
// message is queued. The array layouts without an identity cost a few
// bytes of reading; vLLM's newest layout, whose identity follows the
// events, and the map-shaped batch cost a walk over the events (no
// allocation). It fails on a payload whose outer structure is broken (as
// far as it reads); the events themselves are not checked.
func PeekHeader(payload []byte) (Header, error) {
	var h Header
	var b Batch
	r := reader{b: payload}
	c, ok := r.peek("batch")
	switch {
	case !ok:
	case isArray(c):
		n := r.arrayLen("batch")
		if r.err == nil && n < 2 {
			r.fail(ErrMalformed, "batch")
		}
		if r.err != nil {
			break
		}
		r.skip("ts")
		h.Events = peekEvents(&r, n >= 4) // only the identity needs the events skipped
		if n < 4 || r.err != nil {
			break
		}
		r.skip("data_parallel_rank")
		publisherID(&r, &b)
	case isMap(c):
		n := r.mapLen("batch")
		for i := 0; i < n && r.err == nil; i++ {
			c, _ := r.peek("batch key")
			if !isStr(c) {
				r.skip("batch key")
				r.skip("batch")
				continue
			}
			switch string(r.strBytes("batch key")) {
			case "events":
				h.Events = peekEvents(&r, true)
			case "publisher_id":
				publisherID(&r, &b)
			default:
				r.skip("batch")
			}
		}
	default:
		r.fail(ErrMalformed, "batch")
	}
	if r.err != nil {
		return Header{}, r.err
	}
	h.PublisherID, h.HasPublisherID = b.PublisherID, b.HasPublisherID
	return h, nil
}

// peekEvents reads the events array's length and, with skip, skips its
// elements.
func peekEvents(r *reader, skip bool) int {
	n := r.arrayLen("events")
	for i := 0; skip && i < n && r.err == nil; i++ {
		r.skip("event")
	}
	return max(n, 0)
}
