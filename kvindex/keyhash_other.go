//go:build !amd64 || purego

package kvindex

// useAVX2 is always false here: there are no AVX2 kernels on this
// architecture (or with the purego build tag); tests read it.
var useAVX2 = false

// hashBlock64 returns BlockHash(b[:], nil) on a little-endian machine.
func hashBlock64(b *[64]uint32) uint64 { return hashBlock64Generic(b) }

// keys64 sets dst[i] to the key of block i of tokens (64 tokens per block,
// no extra keys, len(tokens) == 64*len(dst)) chained from parent, on a
// little-endian machine.
func keys64(dst []Key, tokens []uint32, parent Key) { keys64Generic(dst, tokens, parent) }
