package kvindex

import (
	"encoding/binary"

	"github.com/cespare/xxhash/v2"
)

// Key is a router block key: the chained xxhash64 of a block's token IDs and
// extra keys, seeded by the key of the previous block (or by RootKey for
// block 0). Keys are the router's own hashes, independent of the engine's
// block hashes, so kvroute never has to reproduce vLLM's or SGLang's hashing.
type Key uint64

// DefaultBlockSize is the block size in tokens used when Config.BlockSize is
// zero. It matches the block size the llm-d guides run vLLM with.
const DefaultBlockSize = 64

// rootDomain is the versioned domain-separation prefix of every chain root.
// Changing the key layout requires changing this prefix.
const rootDomain = "kvroute/v1\x00"

// keyBufSize is the stack buffer one block is serialised into before hashing:
// an 8-byte parent plus up to 256 token IDs in a single xxhash64 call. Larger
// blocks and blocks with extra keys are streamed through a Digest in chunks of
// this size.
const keyBufSize = 8 + 4*256

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
}

// RootKey returns the chain root for a model or LoRA adapter name:
// xxhash64("kvroute/v1\x00" ‖ name). The model (or adapter) enters the chain
// only here, so the same tokens under two models never share a key.
func RootKey(name string) Key {
	var d xxhash.Digest
	d.Reset()
	_, _ = d.WriteString(rootDomain)
	_, _ = d.WriteString(name)
	return Key(d.Sum64())
}

// ChainKey returns the key of one block:
// xxhash64(parent as 8 bytes little-endian ‖ each token ID as 4 bytes
// little-endian ‖ for each extra key: its length as 8 bytes little-endian ‖
// its bytes). The engine side (Index.Store) and the request side (Keys) both
// use it, which is what makes their keys meet in the index.
func ChainKey(parent Key, tokens []uint32, extra []string) Key {
	var h blockHasher
	return h.key(parent, tokens, extra, "", "")
}

// Keys appends to dst[:0] the keys of every full block of tokens and returns
// the extended slice. A trailing partial block is not keyed. The chain root is
// RootKey(p.LoRA) when p.LoRA is set and RootKey(p.Model) otherwise; the extra
// keys of block i are the Hash of every p.MM item whose placeholder range
// overlaps the block (in slice order), followed on block 0 by p.CacheSalt when
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
	var h blockHasher
	n := len(tokens) / blockSize
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
			k = h.keyMM(parent, tokens[start:end], mm, start, end, salt)
		}
		dst = append(dst, k)
		parent = k
	}
	return dst
}

// blockHasher hashes one block. It lives on the caller's stack; its buffer
// holds the serialised parent and token IDs.
type blockHasher struct {
	d   xxhash.Digest
	buf [keyBufSize]byte
}

// key hashes parent ‖ tokens ‖ extra... ‖ extra1 ‖ extra2 (empty extra1/extra2
// are skipped; elements of extra are always written, even when empty). When
// everything fits the stack buffer it is hashed in one xxhash64 call,
// otherwise it is streamed through the digest a buffer at a time.
func (h *blockHasher) key(parent Key, tokens []uint32, extra []string, extra1, extra2 string) Key {
	binary.LittleEndian.PutUint64(h.buf[:8], uint64(parent))
	if 8+4*len(tokens) <= len(h.buf) {
		n := 8 + putTokens(h.buf[8:], tokens)
		if len(extra) == 0 && extra1 == "" && extra2 == "" {
			return Key(xxhash.Sum64(h.buf[:n]))
		}
		h.d.Reset()
		_, _ = h.d.Write(h.buf[:n])
	} else {
		h.d.Reset()
		h.writeTokens(tokens)
	}
	for _, e := range extra {
		h.writeExtra(e)
	}
	if extra1 != "" {
		h.writeExtra(extra1)
	}
	if extra2 != "" {
		h.writeExtra(extra2)
	}
	return Key(h.d.Sum64())
}

// keyMM hashes a block whose extra keys are the MM items of mm overlapping
// [start, end) followed by salt (when non-empty).
func (h *blockHasher) keyMM(parent Key, tokens []uint32, mm []MMItem, start, end int, salt string) Key {
	binary.LittleEndian.PutUint64(h.buf[:8], uint64(parent))
	h.d.Reset()
	h.writeTokens(tokens)
	for j := range mm {
		if mm[j].Offset >= end {
			break
		}
		if mm[j].Offset+mm[j].Length > start && mm[j].Length > 0 {
			h.writeExtra(mm[j].Hash)
		}
	}
	if salt != "" {
		h.writeExtra(salt)
	}
	return Key(h.d.Sum64())
}

// writeTokens streams the parent already in buf[:8] and then the tokens as
// uint32 little-endian, one buffer at a time.
func (h *blockHasher) writeTokens(tokens []uint32) {
	used := 8
	for {
		room := (len(h.buf) - used) / 4
		if room > len(tokens) {
			room = len(tokens)
		}
		used += putTokens(h.buf[used:], tokens[:room])
		_, _ = h.d.Write(h.buf[:used])
		tokens = tokens[room:]
		if len(tokens) == 0 {
			return
		}
		used = 0
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
