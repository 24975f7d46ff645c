package jsonids

import (
	"encoding/binary"
	"math"
	"math/bits"
)

// Reading one token ID eight bytes at a time. A digit-by-digit loop costs
// about 20 ns per ID of a render response here: each digit waits for the
// one before it (v = v*10 + c), and the loop's exit, at the end of IDs of
// varying length, is a branch the processor mispredicts about once per ID.
// Number instead loads eight bytes as one word, finds where the digits end
// with bitwise arithmetic and converts up to eight digits with three
// multiplications that do not depend on the digits' count; only IDs of nine
// or ten digits, and IDs within eight bytes of the end of b, take the loop.

const (
	ones     = 0x0101010101010101
	highBits = 0x8080808080808080
	low7Bits = 0x7F7F7F7F7F7F7F7F
	nibbles  = 0x0F0F0F0F0F0F0F0F
)

// Number reads the unsigned decimal integer starting at b[i]: one to ten
// digits, no leading zero but for the number 0 itself, at most
// 4294967295 (JSON's grammar for a non-negative integer, within uint32). It
// returns the value and the index of the first byte after its digits; ok is
// false when b[i:] does not start with such a number (no digit, a leading
// zero, more than ten digits, or a value past uint32). What follows the
// digits is the caller's to check. i must be in [0, len(b)].
func Number(b []byte, i int) (v uint32, next int, ok bool) {
	start := i
	var w uint64
	if len(b)-i >= 8 {
		x := binary.LittleEndian.Uint64(b[i:])
		n := leadingDigits(x)
		if n == 0 {
			return 0, i, false
		}
		w = eightDigits(x << (64 - 8*n)) // the digits in the top bytes, zeros below
		i += n
		if n < 8 {
			if n > 1 && b[start] == '0' {
				return 0, i, false
			}
			return uint32(w), i, true
		}
	}
	for i < len(b) && i-start <= 10 { // past eight digits, or near the end of b
		c := b[i] - '0'
		if c > 9 {
			break
		}
		w = w*10 + uint64(c)
		i++
	}
	if n := i - start; n == 0 || n > 10 || w > math.MaxUint32 || (n > 1 && b[start] == '0') {
		return 0, i, false
	}
	return uint32(w), i, true
}

// leadingDigits returns how many of x's bytes, lowest first (b[i], b[i+1],
// ... as loaded little-endian), are ASCII digits before the first that is
// not: 0 to 8. Each byte's test stays in its byte: the sums below never
// carry out of one, as every byte is first cut to seven bits.
func leadingDigits(x uint64) int {
	m := x & low7Bits
	above9 := m + (0x7F-'9')*ones   // high bit set where the byte is past '9'
	atLeast0 := m + (0x80-'0')*ones // high bit set where it is at least '0'
	notDigit := (above9 | ^atLeast0 | x) & highBits
	return bits.TrailingZeros64(notDigit) >> 3
}

// eightDigits converts eight ASCII digits (or zero bytes, read as zeros),
// the most significant in the lowest byte, to their value: pairs of digits,
// then of pairs, then of quadruples, one multiplication each.
func eightDigits(x uint64) uint64 {
	x &= nibbles
	x = (x * (10<<8 + 1)) >> 8
	x = ((x & 0x00FF00FF00FF00FF) * (100<<16 + 1)) >> 16
	return ((x & 0x0000FFFF0000FFFF) * (10000<<32 + 1)) >> 32
}
