package kvroute

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
)

// maxMMPrefixScratch bounds the prefix scratch a pooled Selection keeps for
// the next request: an adapter name is the client's, so a rare long one
// does not stay pinned in the pool.
const maxMMPrefixScratch = 1 << 10

// mmPrefix returns the bytes vLLM puts before the mm_hash of each
// multimodal item of s's request in the item's identifier: none unless
// Config.EnableTowerConnectorLoRA is set and the request targets an
// adapter; then "lora_name:" and, for an adapter of
// Config.TowerConnectorLoRAPaths, its path's fingerprint and ":". The
// result is s's scratch, valid until the next call.
func (s *Selection) mmPrefix() []byte {
	lora := s.req.LoRA
	if !s.r.cfg.EnableTowerConnectorLoRA || lora == "" {
		return nil
	}
	st := &s.st
	if cap(st.mmPrefix) > maxMMPrefixScratch {
		st.mmPrefix = nil
	}
	b := append(append(st.mmPrefix[:0], lora...), ':')
	if fp, ok := s.r.loraFingerprints[lora]; ok {
		b = append(append(b, fp...), ':')
	}
	st.mmPrefix = b
	return b
}

// loraFingerprints returns, for each adapter of paths, vLLM's fingerprint
// of its path: the hex of SHA-256 over the path's canonical CBOR encoding
// as a text string (vLLM's sha256_cbor(lora_path).hex()). nil for none.
func loraFingerprints(paths map[string]string) map[string]string {
	if len(paths) == 0 {
		return nil
	}
	fps := make(map[string]string, len(paths))
	for name, path := range paths {
		sum := sha256.Sum256(append(cborTextHead(uint64(len(path))), path...))
		fps[name] = hex.EncodeToString(sum[:])
	}
	return fps
}

// cborTextHead returns the canonical (shortest) CBOR head of a text string
// of n bytes: major type 3 with n inline below 24, else in 1, 2, 4 or 8
// big-endian bytes.
func cborTextHead(n uint64) []byte {
	const text = 3 << 5
	switch {
	case n < 24:
		return []byte{text | byte(n)}
	case n <= 0xff:
		return []byte{text | 24, byte(n)}
	case n <= 0xffff:
		return binary.BigEndian.AppendUint16([]byte{text | 25}, uint16(n))
	case n <= 0xffffffff:
		return binary.BigEndian.AppendUint32([]byte{text | 26}, uint32(n))
	default:
		return binary.BigEndian.AppendUint64([]byte{text | 27}, n)
	}
}
