package wire

import (
	"encoding/binary"
	"math"
)

// reader is a minimal msgpack cursor over one payload. Errors are sticky:
// the first failure is recorded in err and every later read returns a zero
// value without advancing, so callers check err once per value or loop.
type reader struct {
	b   []byte
	p   int
	err *DecodeError
}

func (r *reader) fail(sentinel error, field string) {
	if r.err == nil {
		r.err = &DecodeError{Err: sentinel, Offset: r.p, Field: field}
	}
}

func (r *reader) failLimit(field, limit string, value, max int) {
	if r.err == nil {
		r.err = &DecodeError{Err: ErrLimit, Offset: r.p, Field: field, Limit: limit, Value: value, Max: max}
	}
}

// remaining is the number of unread bytes.
func (r *reader) remaining() int { return len(r.b) - r.p }

// peek returns the next type byte; ok is false (and err set) at the end.
func (r *reader) peek(field string) (byte, bool) {
	if r.err != nil {
		return 0, false
	}
	if r.p >= len(r.b) {
		r.fail(ErrTruncated, field)
		return 0, false
	}
	return r.b[r.p], true
}

// nextNil consumes a nil and reports whether there was one.
func (r *reader) nextNil() bool {
	if r.err == nil && r.p < len(r.b) && r.b[r.p] == 0xc0 {
		r.p++
		return true
	}
	return false
}

func isArray(c byte) bool { return c&0xf0 == 0x90 || c == 0xdc || c == 0xdd }
func isMap(c byte) bool   { return c&0xf0 == 0x80 || c == 0xde || c == 0xdf }
func isStr(c byte) bool   { return c&0xe0 == 0xa0 || c == 0xd9 || c == 0xda || c == 0xdb }

// need reports whether n more bytes are available, failing with
// ErrTruncated otherwise.
func (r *reader) need(n int, field string) bool {
	if n > len(r.b)-r.p {
		r.fail(ErrTruncated, field)
		return false
	}
	return true
}

// length reads the n-byte big-endian length that follows the type byte. A
// length beyond the payload's size is a truncation, whatever follows: it
// is checked before it is converted, so that a 32-bit length of 2^31 or
// more cannot wrap negative where int has 32 bits.
func (r *reader) length(n int, field string) int {
	if !r.need(1+n, field) {
		return -1
	}
	var v uint64
	switch n {
	case 1:
		v = uint64(r.b[r.p+1])
	case 2:
		v = uint64(binary.BigEndian.Uint16(r.b[r.p+1:]))
	default:
		v = uint64(binary.BigEndian.Uint32(r.b[r.p+1:]))
	}
	if v > uint64(len(r.b)) {
		r.fail(ErrTruncated, field)
		return -1
	}
	r.p += 1 + n
	return int(v)
}

// arrayLen reads an array header. The claimed length is checked against the
// remaining bytes (every element takes at least one), so a caller may size
// a buffer from it without trusting the input. It returns -1 on error.
func (r *reader) arrayLen(field string) int {
	return r.containerLen(field, 0x90, 0xdc, 0xdd, 1)
}

// mapLen reads a map header, checked like arrayLen (two values per entry).
func (r *reader) mapLen(field string) int {
	return r.containerLen(field, 0x80, 0xde, 0xdf, 2)
}

// containerLen reads an array or map header: a fix form (fix | n, n < 16) or
// the 16- and 32-bit forms c16 and c32. The length must fit the remaining
// bytes at minBytes per entry.
func (r *reader) containerLen(field string, fix, c16, c32 byte, minBytes int) int {
	c, ok := r.peek(field)
	if !ok {
		return -1
	}
	var n int
	switch {
	case c&0xf0 == fix:
		r.p++
		n = int(c & 0x0f)
	case c == c16:
		n = r.length(2, field)
	case c == c32:
		n = r.length(4, field)
	default:
		r.fail(ErrMalformed, field)
		return -1
	}
	if n < 0 {
		return -1
	}
	if minBytes*n > r.remaining() {
		r.fail(ErrTruncated, field)
		return -1
	}
	return n
}

// strBytes reads a string and returns its bytes (aliasing the payload).
func (r *reader) strBytes(field string) []byte {
	c, ok := r.peek(field)
	if !ok {
		return nil
	}
	var n int
	switch {
	case c&0xe0 == 0xa0:
		r.p++
		n = int(c & 0x1f)
	case c == 0xd9:
		n = r.length(1, field)
	case c == 0xda:
		n = r.length(2, field)
	case c == 0xdb:
		n = r.length(4, field)
	default:
		r.fail(ErrMalformed, field)
		return nil
	}
	if n < 0 || !r.need(n, field) {
		return nil
	}
	s := r.b[r.p : r.p+n : r.p+n]
	r.p += n
	return s
}

// binBytes reads a bin value (the type byte already checked by the caller).
func (r *reader) binBytes(field string) []byte {
	var n int
	switch r.b[r.p] {
	case 0xc4:
		n = r.length(1, field)
	case 0xc5:
		n = r.length(2, field)
	default:
		n = r.length(4, field)
	}
	if n < 0 || !r.need(n, field) {
		return nil
	}
	s := r.b[r.p : r.p+n : r.p+n]
	r.p += n
	return s
}

func isBin(c byte) bool { return c == 0xc4 || c == 0xc5 || c == 0xc6 }

// intBits reads any msgpack integer and returns its 64-bit two's-complement
// pattern; neg reports a negative value. ok is false (err set) for a
// non-integer.
func (r *reader) intBits(field string) (v uint64, neg, ok bool) {
	c, ok := r.peek(field)
	if !ok {
		return 0, false, false
	}
	b := r.b
	p := r.p
	switch {
	case c <= 0x7f:
		r.p++
		return uint64(c), false, true
	case c >= 0xe0:
		r.p++
		return uint64(int64(int8(c))), true, true
	}
	var size int
	switch c {
	case 0xcc, 0xd0:
		size = 1
	case 0xcd, 0xd1:
		size = 2
	case 0xce, 0xd2:
		size = 4
	case 0xcf, 0xd3:
		size = 8
	default:
		r.fail(ErrMalformed, field)
		return 0, false, false
	}
	if !r.need(1+size, field) {
		return 0, false, false
	}
	r.p += 1 + size
	switch c {
	case 0xcc:
		return uint64(b[p+1]), false, true
	case 0xcd:
		return uint64(binary.BigEndian.Uint16(b[p+1:])), false, true
	case 0xce:
		return uint64(binary.BigEndian.Uint32(b[p+1:])), false, true
	case 0xcf:
		return binary.BigEndian.Uint64(b[p+1:]), false, true
	case 0xd0:
		v := int64(int8(b[p+1]))
		return uint64(v), v < 0, true
	case 0xd1:
		v := int64(int16(binary.BigEndian.Uint16(b[p+1:])))
		return uint64(v), v < 0, true
	case 0xd2:
		v := int64(int32(binary.BigEndian.Uint32(b[p+1:])))
		return uint64(v), v < 0, true
	default:
		v := int64(binary.BigEndian.Uint64(b[p+1:]))
		return uint64(v), v < 0, true
	}
}

// int64Val reads an integer that must fit in an int64.
func (r *reader) int64Val(field string) int64 {
	v, neg, ok := r.intBits(field)
	if !ok {
		return 0
	}
	if !neg && v > math.MaxInt64 {
		r.p -= 9
		r.fail(ErrMalformed, field)
		return 0
	}
	return int64(v)
}

// intVal reads an integer that must fit in an int32 (block sizes, group
// indexes): larger values are malformed for those fields.
func (r *reader) intVal(field string) int {
	start := r.p
	v := r.int64Val(field)
	if r.err == nil && (v > math.MaxInt32 || v < math.MinInt32) {
		r.p = start
		r.fail(ErrMalformed, field)
		return 0
	}
	return int(v)
}

// float reads a float64, float32 or integer as float64 (batch ts).
func (r *reader) float(field string) float64 {
	c, ok := r.peek(field)
	if !ok {
		return 0
	}
	switch c {
	case 0xcb:
		if !r.need(9, field) {
			return 0
		}
		v := math.Float64frombits(binary.BigEndian.Uint64(r.b[r.p+1:]))
		r.p += 9
		return v
	case 0xca:
		if !r.need(5, field) {
			return 0
		}
		v := math.Float32frombits(binary.BigEndian.Uint32(r.b[r.p+1:]))
		r.p += 5
		return float64(v)
	}
	v, neg, ok := r.intBits(field)
	if !ok {
		return 0
	}
	if neg {
		return float64(int64(v))
	}
	return float64(v)
}

// hash reads a block hash: any integer (vLLM's unsigned or SGLang's signed
// int64 form), or a bin of any length (vLLM's digest mode). raw
// aliases the payload for a bin (isBin true) and is nil otherwise.
func (r *reader) hash(field string) (v uint64, raw []byte, bin, neg bool) {
	c, ok := r.peek(field)
	if !ok {
		return 0, nil, false, false
	}
	if isBin(c) {
		raw = r.binBytes(field)
		if r.err != nil {
			return 0, nil, false, false
		}
		return hashFromBytes(raw), raw, true, false
	}
	v, neg, _ = r.intBits(field)
	return v, nil, false, neg
}

// hashFromBytes is the big-endian value of the last 8 bytes of b (all of b
// when shorter; 0 for an empty b).
func hashFromBytes(b []byte) uint64 {
	if len(b) >= 8 {
		return binary.BigEndian.Uint64(b[len(b)-8:])
	}
	var v uint64
	for _, c := range b {
		v = v<<8 | uint64(c)
	}
	return v
}

// skip skips one value of any type, iteratively (nesting depth cannot grow
// the stack). Every pending element needs at least one byte, so a claimed
// container size larger than the remaining input fails immediately.
func (r *reader) skip(field string) {
	if r.err != nil {
		return
	}
	b := r.b
	p := r.p
	pending := 1
	for pending > 0 {
		if p >= len(b) {
			r.p = p
			r.fail(ErrTruncated, field)
			return
		}
		c := b[p]
		pending--
		// Fast path: the integer forms msgspec writes for token IDs and
		// hashes, which make up most of a batch (PeekHeader skips every
		// event of vLLM's snapshot layout to reach the identity). A
		// truncation it runs into is caught at the top of the loop.
		if p+9 <= len(b) {
			switch {
			case c <= 0x7f:
				p++
				continue
			case c == 0xce:
				p += 5
				continue
			case c == 0xcd:
				p += 3
				continue
			case c == 0xcf:
				p += 9
				continue
			case c == 0xcc:
				p += 2
				continue
			}
		}
		var n int // payload bytes following the header
		hdr := 1
		switch {
		case c <= 0x7f || c >= 0xe0 || c == 0xc0 || c == 0xc2 || c == 0xc3:
		case c&0xf0 == 0x80:
			pending += 2 * int(c&0x0f)
		case c&0xf0 == 0x90:
			pending += int(c & 0x0f)
		case c&0xe0 == 0xa0:
			n = int(c & 0x1f)
		case c == 0xc1:
			r.p = p
			r.fail(ErrMalformed, field)
			return
		default:
			var lenBytes int
			switch c {
			case 0xc4, 0xd9, 0xc7:
				lenBytes = 1
			case 0xc5, 0xda, 0xc8, 0xdc, 0xde:
				lenBytes = 2
			case 0xc6, 0xdb, 0xc9, 0xdd, 0xdf:
				lenBytes = 4
			case 0xca:
				n = 4
			case 0xcb:
				n = 8
			case 0xcc, 0xd0:
				n = 1
			case 0xcd, 0xd1:
				n = 2
			case 0xce, 0xd2:
				n = 4
			case 0xcf, 0xd3:
				n = 8
			case 0xd4:
				n = 2
			case 0xd5:
				n = 3
			case 0xd6:
				n = 5
			case 0xd7:
				n = 9
			case 0xd8:
				n = 17
			}
			if lenBytes > 0 {
				if p+1+lenBytes > len(b) {
					r.p = p
					r.fail(ErrTruncated, field)
					return
				}
				var u uint64
				switch lenBytes {
				case 1:
					u = uint64(b[p+1])
				case 2:
					u = uint64(binary.BigEndian.Uint16(b[p+1:]))
				default:
					u = uint64(binary.BigEndian.Uint32(b[p+1:]))
				}
				if u > uint64(len(b)) { // checked before int(u), which wraps where int has 32 bits
					r.p = p
					r.fail(ErrTruncated, field)
					return
				}
				l := int(u)
				hdr += lenBytes
				switch c {
				case 0xdc, 0xdd:
					pending += l
				case 0xde, 0xdf:
					pending += 2 * l
				case 0xc7, 0xc8, 0xc9:
					n = l + 1 // ext type byte
				default:
					n = l
				}
			}
		}
		if n > len(b)-p-hdr {
			r.p = p
			r.fail(ErrTruncated, field)
			return
		}
		p += hdr + n
		if pending > len(b)-p {
			r.p = p
			r.fail(ErrTruncated, field)
			return
		}
	}
	r.p = p
}
