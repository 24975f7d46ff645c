package kvindex

import "github.com/zeebo/xxh3"

// keysChunk is the most blocks keys64 hands one assembly call (which the
// scheduler cannot preempt): 64 KiB of tokens, a few microseconds.
const keysChunk = 256

// hashBlock64Generic is hashBlock64 through xxh3.Hash over the tokens' own
// memory (little-endian machines only).
func hashBlock64Generic(b *[64]uint32) uint64 { return xxh3.Hash(tokenBytes(b[:])) }

// keys64Generic is keys64 through xxh3.Hash (little-endian machines only):
// the block hashes do not depend on each other, so the CPU overlaps
// consecutive blocks; only Chain is sequential.
func keys64Generic(dst []Key, tokens []uint32, parent Key) {
	for i := range dst {
		parent = Chain(parent, xxh3.Hash(tokenBytes(tokens[64*i:64*i+64])))
		dst[i] = parent
	}
}
