package simengine

import (
	"crypto/sha256"
	"encoding/binary"
)

// NoneHashSeed is the seed vLLM hashes into the root parent of every block chain
// (DEFAULT_NONE_HASH_SEED) when PYTHONHASHSEED is unset and the prefix-caching
// hash algorithm is sha256 or sha256_cbor. Every simulated engine uses it, so all
// instances produce identical block hashes for identical tokens, like a vLLM
// fleet started with --prefix-caching-hash-algo sha256_cbor.
const NoneHashSeed = "vllm-none-hash"

// Digest is a full 32-byte SHA-256 block hash. Chains are built on full digests;
// only events carry the shortened form (Digest.U64).
type Digest [32]byte

// U64 returns the event form of a vLLM block hash: the last 8 bytes of the digest
// read big-endian, as vLLM sends it with VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=1
// (the default).
func (d Digest) U64() uint64 { return binary.BigEndian.Uint64(d[24:]) }

// NoneHash is vLLM's NONE_HASH for sha256_cbor with the fixed seed:
// sha256(CBOR text string "vllm-none-hash"). It is the parent of block 0.
var NoneHash = SeedHash(NoneHashSeed)

// SeedHash returns sha256 of the canonical CBOR encoding of seed as a text
// string, which is how vLLM derives NONE_HASH from a seed with sha256_cbor.
func SeedHash(seed string) Digest {
	buf := appendCBORHead(nil, cborText, uint64(len(seed)))
	buf = append(buf, seed...)
	return sha256.Sum256(buf)
}

// CBOR major types used by the block-hash input.
const (
	cborUint   = 0 << 5
	cborNegInt = 1 << 5 // -1 - n
	cborBytes  = 2 << 5
	cborText   = 3 << 5
	cborArray  = 4 << 5
	cborNull   = 0xf6
)

// appendCBORHead appends a canonical (shortest-form) CBOR item head.
func appendCBORHead(dst []byte, major byte, n uint64) []byte {
	switch {
	case n < 24:
		return append(dst, major|byte(n))
	case n <= 0xff:
		return append(dst, major|24, byte(n))
	case n <= 0xffff:
		return append(dst, major|25, byte(n>>8), byte(n))
	case n <= 0xffffffff:
		return append(dst, major|26, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	default:
		dst = append(dst, major|27)
		return binary.BigEndian.AppendUint64(dst, n)
	}
}

// AppendBlockCBOR appends the exact bytes vLLM's sha256_cbor hashes for one block:
// the canonical CBOR of the 3-tuple (parent digest as a byte string, tuple of token
// IDs as unsigned ints, None or a tuple of extra keys as text strings). Nil or empty
// extraKeys encode as CBOR null, as vLLM passes None when a block has no extra keys.
func AppendBlockCBOR(dst []byte, parent Digest, tokens []uint32, extraKeys []string) []byte {
	dst = appendBlockHead(dst, parent, tokens)
	if len(extraKeys) == 0 {
		return append(dst, cborNull)
	}
	dst = appendCBORHead(dst, cborArray, uint64(len(extraKeys)))
	for _, k := range extraKeys {
		dst = appendCBORText(dst, k)
	}
	return dst
}

// appendBlockCBORKeys is AppendBlockCBOR with typed extra keys: a
// multimodal item's key is the 2-tuple (identifier as a text string, offset
// as an integer), as vLLM's cbor2 encodes it.
func appendBlockCBORKeys(dst []byte, parent Digest, tokens []uint32, keys []ExtraKey) []byte {
	dst = appendBlockHead(dst, parent, tokens)
	if len(keys) == 0 {
		return append(dst, cborNull)
	}
	dst = appendCBORHead(dst, cborArray, uint64(len(keys)))
	for _, k := range keys {
		if !k.MM {
			dst = appendCBORText(dst, k.Value)
			continue
		}
		dst = append(dst, cborArray|2)
		dst = appendCBORText(dst, k.Value)
		if k.Offset >= 0 {
			dst = appendCBORHead(dst, cborUint, uint64(k.Offset))
		} else {
			dst = appendCBORHead(dst, cborNegInt, uint64(-1-k.Offset))
		}
	}
	return dst
}

// appendBlockHead appends the 3-tuple's header, the parent digest and the
// block's token IDs.
func appendBlockHead(dst []byte, parent Digest, tokens []uint32) []byte {
	dst = append(dst, cborArray|3)
	dst = appendCBORHead(dst, cborBytes, uint64(len(parent)))
	dst = append(dst, parent[:]...)
	dst = appendCBORHead(dst, cborArray, uint64(len(tokens)))
	for _, t := range tokens {
		dst = appendCBORHead(dst, cborUint, uint64(t))
	}
	return dst
}

// appendCBORText appends s as a CBOR text string.
func appendCBORText(dst []byte, s string) []byte {
	dst = appendCBORHead(dst, cborText, uint64(len(s)))
	return append(dst, s...)
}

// HashBlock computes vLLM's hash_block_tokens with sha256_cbor: the digest of one
// full block chained on its parent's digest (NoneHash for block 0).
func HashBlock(parent Digest, tokens []uint32, extraKeys []string) Digest {
	return sha256.Sum256(AppendBlockCBOR(nil, parent, tokens, extraKeys))
}

// HashBlockKeys is HashBlock with typed extra keys, for a block that a
// multimodal item's placeholder tokens overlap (see MMItem).
func HashBlockKeys(parent Digest, tokens []uint32, keys []ExtraKey) Digest {
	return sha256.Sum256(appendBlockCBORKeys(nil, parent, tokens, keys))
}

// hasher hashes blocks with a reusable buffer (one per engine, used under its lock).
type hasher struct{ buf []byte }

func (h *hasher) hash(parent Digest, tokens []uint32, keys []ExtraKey) Digest {
	h.buf = appendBlockCBORKeys(h.buf[:0], parent, tokens, keys)
	return sha256.Sum256(h.buf)
}
