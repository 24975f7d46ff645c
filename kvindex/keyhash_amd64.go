//go:build amd64 && !purego

package kvindex

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

// useAVX2 selects the AVX2 block kernels (keyhash_amd64.s). Without AVX2
// (or with the purego build tag) every block goes through xxh3.Hash.
var useAVX2 = cpu.X86.HasAVX2

// The AVX2 kernels compute XXH3-64 (seed 0, default secret) of a 256-byte
// block — the same value as xxh3.Hash, so the key scheme is unchanged — for
// the default block size of 64 tokens: XXH3's long-input path (inputs over
// 240 bytes) with its eight 64-bit accumulators in two vector registers,
// three stripes at secret offsets 0, 8 and 16, the last stripe (bytes
// 192–255) at offset 121, no scramble (one follows only a full 1 KiB
// block) and the merge at offset 11. xxh3.Hash reaches the same value
// through a general dispatch (length switch, accumulators in memory, an
// assembly call with its own loop set-up, a vector-to-scalar round trip)
// whose fixed cost is most of the time of a 256-byte input; here all of it
// stays in registers, and keys64AVX2 runs the whole chain in one call.

// hashBlock64AVX2 returns XXH3-64 of the 256 bytes of tokens.
//
//go:noescape
func hashBlock64AVX2(tokens *[64]uint32) uint64

// keys64AVX2 sets dst[i] = Chain(parent, XXH3-64(block i)) for the n
// blocks of 64 tokens at tokens, chaining each key into the next.
//
//go:noescape
func keys64AVX2(dst *Key, tokens *uint32, n int, parent Key)

// hashBlock64 returns BlockHash(b[:], nil) on a little-endian machine.
func hashBlock64(b *[64]uint32) uint64 {
	if useAVX2 {
		return hashBlock64AVX2(b)
	}
	return hashBlock64Generic(b)
}

// keys64 sets dst[i] to the key of block i of tokens (64 tokens per block,
// no extra keys, len(tokens) == 64*len(dst)) chained from parent, on a
// little-endian machine.
func keys64(dst []Key, tokens []uint32, parent Key) {
	if !useAVX2 {
		keys64Generic(dst, tokens, parent)
		return
	}
	tokens = tokens[:64*len(dst)]
	// An assembly call cannot be preempted: a chunk of keysChunk blocks
	// (64 KiB of tokens, a few microseconds) bounds how long a huge
	// prompt holds off the scheduler and the garbage collector.
	for len(dst) > 0 {
		n := min(len(dst), keysChunk)
		keys64AVX2(unsafe.SliceData(dst), unsafe.SliceData(tokens), n, parent)
		parent = dst[n-1]
		dst, tokens = dst[n:], tokens[64*n:]
	}
}
