package kvindex

import (
	"encoding/binary"
	"slices"

	"github.com/zeebo/xxh3"
)

// Key is a router block key: a 64-bit hash of a block's token IDs and extra
// keys chained with the key of the previous block (or with RootKey for block
// 0), so that a key stands for the whole prefix up to and including its
// block. Keys are the router's own hashes, independent of the engine's block
// hashes, so kvroute never has to reproduce vLLM's or SGLang's hashing.
type Key uint64

// KeySchemeVersion identifies the layout of Key (documented in the package
// doc). It changes whenever the same tokens would get different keys, so
// that anything persisted with keys (checkpoints) can tell it was written
// under another scheme and must be rebuilt rather than matched. Version 1
// hashed each block together with its parent key in one XXH64 pass;
// version 2 hashes each block on its own with XXH3-64 (SIMD on amd64 and
// arm64) and chains the 64-bit block hashes with a bijective mix, so the CPU
// hashes consecutive blocks in parallel. A faster way to compute the same
// values (the AVX2 kernel for 64-token blocks) leaves the version alone.
const KeySchemeVersion = 2

// DefaultBlockSize is the block size in tokens used when Config.BlockSize is
// zero. It matches the block size the llm-d guides run vLLM with.
const DefaultBlockSize = 64

// rootDomain is the versioned domain-separation prefix of every chain root.
// It changes with KeySchemeVersion.
const rootDomain = "kvroute/v2\x00"

// keyBufSize is the stack buffer tokens are serialised into on big-endian
// machines (where a token slice is not already little-endian bytes) and
// the chunk size extra keys are streamed with.
const keyBufSize = 4 * 256

// MMItem is one multimodal item (image, audio clip, …) of a request. Its
// identifier is an extra key of every block its placeholder tokens overlap.
type MMItem struct {
	Hash   string // multimodal item identifier (vLLM mm_hash)
	Offset int    // first placeholder token of the item in the prompt
	Length int    // number of placeholder tokens
}

// KeyParams are the request-side inputs of key computation besides the
// token IDs: they decide the chain root and the extra keys of each block.
type KeyParams struct {
	Model     string   // base model name: the chain root
	LoRA      string   // adapter name; when non-empty it replaces Model at the root
	CacheSalt string   // extra key of block 0 only
	MM        []MMItem // extra keys of every block they overlap, sorted by Offset
	// MMPrefix, when non-empty, is written before every MM item's Hash:
	// the item's extra key is MMPrefix ‖ Hash. vLLM keys a multimodal
	// item by an identifier that, for some engine settings, is its
	// mm_hash behind a per-adapter prefix (see the package doc); the
	// prefix is given apart so that the caller builds no string per item.
	MMPrefix []byte
}

// RootKey returns the chain root for a model or LoRA adapter name:
// XXH3-64("kvroute/v2\x00" ‖ name). The model (or adapter) enters the chain
// only here, so the same tokens under two models never share a key.
func RootKey(name string) Key {
	if len(name) <= 128-len(rootDomain) {
		// One-shot over a stack copy: cheaper than setting up the
		// streaming hasher (Keys computes a root per request).
		var buf [128]byte
		n := copy(buf[:], rootDomain)
		n += copy(buf[n:], name)
		return Key(xxh3.Hash(buf[:n]))
	}
	var d xxh3.Hasher
	_, _ = d.WriteString(rootDomain)
	_, _ = d.WriteString(name)
	return Key(d.Sum64())
}

// ChainKey returns the key of one block: Chain(parent, BlockHash(tokens,
// extra)). The engine side (Index.Store) and the request side (Keys) both
// use it, which is what makes their keys meet in the index.
func ChainKey(parent Key, tokens []uint32, extra []string) Key {
	var h blockHasher
	return h.key(parent, tokens, extra, "", "")
}

// BlockHash returns the hash of one block on its own, independent of its
// position in a chain: XXH3-64(each token ID as 4 bytes little-endian ‖ for
// each extra key: its length as 8 bytes little-endian ‖ its bytes).
func BlockHash(tokens []uint32, extra []string) uint64 {
	var h blockHasher
	return h.hash(tokens, extra, "", "")
}

// Chain combines a parent key and a block hash into the block's key:
//
//	x = parent XOR (block × 0x9E3779B97F4A7C15)   (mod 2^64)
//	x ^= x >> 30; x *= 0xBF58476D1CE4E5B9
//	x ^= x >> 27; x *= 0x94D049BB133111EB
//	x ^= x >> 31
//
// Both steps are bijections, so for a fixed parent two different block
// hashes never give the same key, and for a fixed block hash two different
// parents never do: a collision needs two chains whose 64-bit states collide
// by chance, as with one hash over the whole prefix. The final steps are
// SplitMix64's finaliser, whose avalanche makes every key bit depend on
// every bit of both inputs.
func Chain(parent Key, block uint64) Key {
	x := uint64(parent) ^ block*0x9E3779B97F4A7C15
	x ^= x >> 30
	x *= 0xBF58476D1CE4E5B9
	x ^= x >> 27
	x *= 0x94D049BB133111EB
	x ^= x >> 31
	return Key(x)
}

// Keys appends to dst[:0] the keys of every full block of tokens and returns
// the extended slice. A trailing partial block is not keyed. The chain root is
// RootKey(p.LoRA) when p.LoRA is set and RootKey(p.Model) otherwise; the extra
// keys of block i are p.MMPrefix ‖ Hash of every p.MM item whose placeholder
// range overlaps the block (in slice order), followed on block 0 by p.CacheSalt when
// it is non-empty — the order in which vLLM builds its extra keys. With a dst
// of sufficient capacity Keys allocates nothing. p may be nil (no model name,
// no extra keys); blockSize <= 0 yields no keys.
func Keys(dst []Key, tokens []uint32, blockSize int, p *KeyParams) []Key {
	dst = dst[:0]
	if blockSize <= 0 || len(tokens) < blockSize {
		return dst
	}
	var params KeyParams
	if p != nil {
		params = *p
	}
	root := params.Model
	if params.LoRA != "" {
		root = params.LoRA
	}
	parent := RootKey(root)
	n := len(tokens) / blockSize
	if len(params.MM) == 0 && params.CacheSalt == "" && nativeLittleEndian {
		if blockSize == 64 {
			// The common request at the default block size: one call
			// keys every block (keys64, AVX2 on amd64).
			dst = slices.Grow(dst, n)[:n]
			keys64(dst, tokens, parent)
			return dst
		}
		// The common request: one XXH3-64 call per block over the tokens'
		// own memory. Block hashes do not depend on each other, so the CPU
		// overlaps consecutive blocks; only the cheap Chain is sequential.
		for i := 0; i < n; i++ {
			parent = Chain(parent, xxh3.Hash(tokenBytes(tokens[i*blockSize:(i+1)*blockSize])))
			dst = append(dst, parent)
		}
		return dst
	}
	var h blockHasher
	lo := 0 // first MM item that may still overlap the current block
	for i := 0; i < n; i++ {
		start, end := i*blockSize, (i+1)*blockSize
		for lo < len(params.MM) && params.MM[lo].Offset+params.MM[lo].Length <= start {
			lo++
		}
		mm := params.MM[lo:]
		hasMM := false
		for j := range mm {
			if mm[j].Offset >= end {
				break
			}
			if mm[j].Offset+mm[j].Length > start && mm[j].Length > 0 {
				hasMM = true
				break
			}
		}
		salt := ""
		if i == 0 {
			salt = params.CacheSalt
		}
		var k Key
		if !hasMM && salt == "" {
			k = h.key(parent, tokens[start:end], nil, "", "")
		} else {
			k = h.keyMM(parent, tokens[start:end], mm, params.MMPrefix, start, end, salt)
		}
		dst = append(dst, k)
		parent = k
	}
	return dst
}

// blockHasher hashes one block. It lives on the caller's stack; its buffer
// holds serialised token IDs on big-endian machines.
type blockHasher struct {
	d   xxh3.Hasher
	buf [keyBufSize]byte
}

// key returns Chain(parent, hash(tokens, extra, extra1, extra2)).
func (h *blockHasher) key(parent Key, tokens []uint32, extra []string, extra1, extra2 string) Key {
	return Chain(parent, h.hash(tokens, extra, extra1, extra2))
}

// hash hashes tokens ‖ extra... ‖ extra1 ‖ extra2 (empty extra1/extra2 are
// skipped; elements of extra are always written, even when empty). Without
// extra keys on a little-endian machine it is one XXH3-64 call over the
// tokens' own memory; otherwise the bytes are streamed through the digest.
func (h *blockHasher) hash(tokens []uint32, extra []string, extra1, extra2 string) uint64 {
	plain := len(extra) == 0 && extra1 == "" && extra2 == ""
	if nativeLittleEndian && plain {
		if len(tokens) == 64 {
			return hashBlock64((*[64]uint32)(tokens))
		}
		return xxh3.Hash(tokenBytes(tokens))
	}
	h.d.Reset()
	h.writeTokens(tokens)
	for _, e := range extra {
		h.writeExtra(e)
	}
	if extra1 != "" {
		h.writeExtra(extra1)
	}
	if extra2 != "" {
		h.writeExtra(extra2)
	}
	return h.d.Sum64()
}

// keyMM returns the key of a block whose extra keys are the MM items of mm
// overlapping [start, end), each behind prefix, followed by salt (when
// non-empty).
func (h *blockHasher) keyMM(parent Key, tokens []uint32, mm []MMItem, prefix []byte, start, end int, salt string) Key {
	h.d.Reset()
	h.writeTokens(tokens)
	for j := range mm {
		if mm[j].Offset >= end {
			break
		}
		if mm[j].Offset+mm[j].Length > start && mm[j].Length > 0 {
			h.writeExtraPrefixed(prefix, mm[j].Hash)
		}
	}
	if salt != "" {
		h.writeExtra(salt)
	}
	return Chain(parent, h.d.Sum64())
}

// writeTokens streams the tokens as uint32 little-endian: straight from
// their memory on little-endian machines, a buffer at a time otherwise.
func (h *blockHasher) writeTokens(tokens []uint32) {
	if nativeLittleEndian {
		_, _ = h.d.Write(tokenBytes(tokens))
		return
	}
	for len(tokens) > 0 {
		n := min(len(tokens), len(h.buf)/4)
		_, _ = h.d.Write(h.buf[:putTokens(h.buf[:], tokens[:n])])
		tokens = tokens[n:]
	}
}

// writeExtra writes one extra key: its length as 8 bytes little-endian, then
// its bytes.
func (h *blockHasher) writeExtra(s string) {
	var l [8]byte
	binary.LittleEndian.PutUint64(l[:], uint64(len(s)))
	_, _ = h.d.Write(l[:])
	_, _ = h.d.WriteString(s)
}

// writeExtraPrefixed writes the extra key prefix ‖ s, as writeExtra does:
// the length of both as 8 bytes little-endian, then their bytes.
func (h *blockHasher) writeExtraPrefixed(prefix []byte, s string) {
	var l [8]byte
	binary.LittleEndian.PutUint64(l[:], uint64(len(prefix)+len(s)))
	_, _ = h.d.Write(l[:])
	_, _ = h.d.Write(prefix)
	_, _ = h.d.WriteString(s)
}
