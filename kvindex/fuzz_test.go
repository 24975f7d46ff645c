package kvindex

import (
	"encoding/binary"
	"testing"
)

// FuzzKeys checks Keys against a straightforward implementation of the
// documented layout, for arbitrary tokens, block sizes, salts and
// multimodal items.
func FuzzKeys(f *testing.F) {
	f.Add([]byte{1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 4, 0, 0, 0}, uint8(2), "", "img", uint8(1), uint8(2), "model", "")
	f.Add(make([]byte, 4*40), uint8(8), "salt", "", uint8(0), uint8(0), "m", "lora")
	f.Fuzz(func(t *testing.T, raw []byte, bs uint8, salt, mmHash string, mmOff, mmLen uint8, model, lora string) {
		tokens := make([]uint32, len(raw)/4)
		for i := range tokens {
			tokens[i] = binary.LittleEndian.Uint32(raw[4*i:])
		}
		blockSize := int(bs%32) + 1
		mm := []MMItem{{Hash: mmHash, Offset: int(mmOff), Length: int(mmLen)}, {Hash: mmHash + "-2", Offset: int(mmOff) + int(mmLen), Length: 3}}
		p := &KeyParams{Model: model, LoRA: lora, CacheSalt: salt, MM: mm}
		got := Keys(nil, tokens, blockSize, p)

		root := model
		if lora != "" {
			root = lora
		}
		parent := refRoot(root)
		n := len(tokens) / blockSize
		if len(got) != n {
			t.Fatalf("got %d keys, want %d", len(got), n)
		}
		for i := 0; i < n; i++ {
			start, end := i*blockSize, (i+1)*blockSize
			var extra []string
			for _, it := range mm {
				if it.Length > 0 && it.Offset < end && it.Offset+it.Length > start {
					extra = append(extra, it.Hash)
				}
			}
			if i == 0 && salt != "" {
				extra = append(extra, salt)
			}
			parent = refKey(parent, tokens[start:end], extra...)
			if got[i] != Key(parent) {
				t.Fatalf("block %d: got %#x, want %#x", i, got[i], parent)
			}
		}
	})
}
