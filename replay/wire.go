package replay

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Layout is the shape of replay replies.
type Layout string

const (
	// LayoutCurrent is vllm#45177 and later (vLLM ≥ v0.26): each batch is
	// [topic, seq8, payload] after the delimiter, END is ["", ff×8, ""].
	LayoutCurrent Layout = "current"
	// LayoutLegacy is earlier vLLM and SGLang: each batch is [seq8, payload],
	// END is [ff×8, ""].
	LayoutLegacy Layout = "legacy"
)

// Validate accepts "" (meaning current), "current" and "legacy".
func (l Layout) Validate() error {
	switch l {
	case "", LayoutCurrent, LayoutLegacy:
		return nil
	}
	return fmt.Errorf("replay: unknown layout %q (want %q or %q)", l, LayoutCurrent, LayoutLegacy)
}

// EndSeq is the sequence of the END sentinel: -1 as a signed 64-bit integer.
const EndSeq = math.MaxUint64

var endSeq8 = [8]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}

// RequestFrames returns the frames a DEALER sends to ask for every buffered
// batch from start: an empty delimiter and start as 8 bytes big-endian.
func RequestFrames(start uint64) [][]byte {
	return [][]byte{{}, binary.BigEndian.AppendUint64(nil, start)}
}

// reply is one parsed reply message.
type reply struct {
	end     bool
	seq     uint64
	topic   []byte
	payload []byte
	layout  Layout
}

// parseReply decodes a reply as the DEALER sees it: an optional empty
// delimiter, then [seq8, payload] or [topic, seq8, payload]. A sequence of
// ff×8 or an empty payload is the END sentinel.
func parseReply(frames [][]byte) (reply, error) {
	f := frames
	if len(f) > 0 && len(f[0]) == 0 {
		f = f[1:]
	}
	var r reply
	var seq8 []byte
	switch len(f) {
	case 2:
		seq8, r.payload, r.layout = f[0], f[1], LayoutLegacy
	case 3:
		r.topic, seq8, r.payload, r.layout = f[0], f[1], f[2], LayoutCurrent
	default:
		return r, fmt.Errorf("%w: %d frames after the delimiter", ErrMalformed, len(f))
	}
	if len(seq8) != 8 {
		return r, fmt.Errorf("%w: %d-byte sequence frame", ErrMalformed, len(seq8))
	}
	r.seq = binary.BigEndian.Uint64(seq8)
	r.end = r.seq == EndSeq || len(r.payload) == 0
	return r, nil
}

// parseStart decodes a request's start sequence like vLLM does
// (int.from_bytes(frame, "big"), any length): values that do not fit in 64
// bits saturate, which replays nothing.
func parseStart(b []byte) uint64 {
	for len(b) > 8 {
		if b[0] != 0 {
			return math.MaxUint64
		}
		b = b[1:]
	}
	var v uint64
	for _, c := range b {
		v = v<<8 | uint64(c)
	}
	return v
}
