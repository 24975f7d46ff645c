package wire

import (
	"encoding/binary"
	"math"
)

// The msgpack primitives of AppendBatch, each in the smallest form, as
// msgspec writes them.

func appendOptInt(dst []byte, v int64, ok bool) []byte {
	if !ok {
		return append(dst, 0xc0)
	}
	return appendInt(dst, v)
}

func appendOptStr(dst []byte, s string) []byte {
	if s == "" {
		return append(dst, 0xc0)
	}
	return appendStr(dst, s)
}

func appendFloat(dst []byte, f float64) []byte {
	return binary.BigEndian.AppendUint64(append(dst, 0xcb), math.Float64bits(f))
}

// appendUint writes v in the smallest unsigned form (as msgspec does).
func appendUint(dst []byte, v uint64) []byte {
	switch {
	case v <= 0x7f:
		return append(dst, byte(v))
	case v <= math.MaxUint8:
		return append(dst, 0xcc, byte(v))
	case v <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(dst, 0xcd), uint16(v))
	case v <= math.MaxUint32:
		return binary.BigEndian.AppendUint32(append(dst, 0xce), uint32(v))
	}
	return binary.BigEndian.AppendUint64(append(dst, 0xcf), v)
}

// appendInt writes v in the smallest form: unsigned forms for v >= 0,
// negative fixint or int8..int64 otherwise (as msgspec does).
func appendInt(dst []byte, v int64) []byte {
	switch {
	case v >= 0:
		return appendUint(dst, uint64(v))
	case v >= -32:
		return append(dst, byte(v))
	case v >= math.MinInt8:
		return append(dst, 0xd0, byte(v))
	case v >= math.MinInt16:
		return binary.BigEndian.AppendUint16(append(dst, 0xd1), uint16(v))
	case v >= math.MinInt32:
		return binary.BigEndian.AppendUint32(append(dst, 0xd2), uint32(v))
	}
	return binary.BigEndian.AppendUint64(append(dst, 0xd3), uint64(v))
}

func appendStr(dst []byte, s string) []byte {
	n := len(s)
	switch {
	case n < 32:
		dst = append(dst, 0xa0|byte(n))
	case n <= math.MaxUint8:
		dst = append(dst, 0xd9, byte(n))
	case n <= math.MaxUint16:
		dst = binary.BigEndian.AppendUint16(append(dst, 0xda), uint16(n))
	default:
		dst = binary.BigEndian.AppendUint32(append(dst, 0xdb), uint32(n))
	}
	return append(dst, s...)
}

func appendBinHeader(dst []byte, n int) []byte {
	switch {
	case n <= math.MaxUint8:
		return append(dst, 0xc4, byte(n))
	case n <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(dst, 0xc5), uint16(n))
	}
	return binary.BigEndian.AppendUint32(append(dst, 0xc6), uint32(n))
}

func appendBin(dst []byte, b []byte) []byte {
	return append(appendBinHeader(dst, len(b)), b...)
}

func appendArrayHeader(dst []byte, n int) []byte {
	switch {
	case n < 16:
		return append(dst, 0x90|byte(n))
	case n <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(dst, 0xdc), uint16(n))
	}
	return binary.BigEndian.AppendUint32(append(dst, 0xdd), uint32(n))
}

func appendMapHeader(dst []byte, n int) []byte {
	switch {
	case n < 16:
		return append(dst, 0x80|byte(n))
	case n <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(dst, 0xde), uint16(n))
	}
	return binary.BigEndian.AppendUint32(append(dst, 0xdf), uint32(n))
}

// appendHexBin writes the bytes whose hex is s as a bin (ExtraKeyBytes).
// Invalid hex (a hand-built key) is written as nil.
func appendHexBin(dst []byte, s string) []byte {
	if !validHex(s) {
		return append(dst, 0xc0)
	}
	return appendHexDecoded(appendBinHeader(dst, len(s)/2), s)
}

// appendHexRaw writes the raw msgpack bytes whose hex is s (ExtraKeyOpaque).
// Invalid hex or an empty value is written as nil.
func appendHexRaw(dst []byte, s string) []byte {
	if s == "" || !validHex(s) {
		return append(dst, 0xc0)
	}
	start := len(dst)
	dst = appendHexDecoded(dst, s)
	r := reader{b: dst[start:]}
	if r.skip("extra key"); r.err != nil || r.p != len(r.b) {
		return append(dst[:start], 0xc0) // not exactly one msgpack value
	}
	return dst
}

func validHex(s string) bool {
	if len(s)%2 != 0 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if unhex(s[i]) > 15 {
			return false
		}
	}
	return true
}

func appendHexDecoded(dst []byte, s string) []byte {
	for i := 0; i+1 < len(s); i += 2 {
		dst = append(dst, unhex(s[i])<<4|unhex(s[i+1]))
	}
	return dst
}

func unhex(c byte) byte {
	switch {
	case c >= '0' && c <= '9':
		return c - '0'
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10
	}
	return 0xff
}
