package kvindex

import (
	"encoding/binary"
	"unsafe"
)

// nativeLittleEndian reports whether uint32 values are stored little-endian in
// memory, in which case a token slice already has the byte layout the keys
// hash and can be copied as bytes.
var nativeLittleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// putTokens writes tokens as uint32 little-endian into dst, which must hold
// 4*len(tokens) bytes, and returns the number of bytes written.
func putTokens(dst []byte, tokens []uint32) int {
	n := 4 * len(tokens)
	if n == 0 {
		return 0
	}
	dst = dst[:n]
	if nativeLittleEndian {
		return copy(dst, unsafe.Slice((*byte)(unsafe.Pointer(&tokens[0])), n))
	}
	for i, t := range tokens {
		binary.LittleEndian.PutUint32(dst[4*i:4*i+4], t)
	}
	return n
}

// tokenBytes views tokens as bytes in memory order (little-endian uint32s
// when nativeLittleEndian), without copying.
func tokenBytes(tokens []uint32) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(tokens))), 4*len(tokens))
}
