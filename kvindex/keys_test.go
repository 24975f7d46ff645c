package kvindex

import (
	"encoding/binary"
	"testing"

	"github.com/cespare/xxhash/v2"
	"github.com/stretchr/testify/require"
)

const vecModel = "meta-llama/Llama-3.1-8B-Instruct"

// refKey computes one block key the slow, obvious way: build the byte string
// of the documented layout and hash it with xxhash.Sum64.
func refKey(parent uint64, tokens []uint32, extra ...string) uint64 {
	var b []byte
	b = binary.LittleEndian.AppendUint64(b, parent)
	for _, t := range tokens {
		b = binary.LittleEndian.AppendUint32(b, t)
	}
	for _, e := range extra {
		b = binary.LittleEndian.AppendUint64(b, uint64(len(e)))
		b = append(b, e...)
	}
	return xxhash.Sum64(b)
}

func refRoot(name string) uint64 { return xxhash.Sum64([]byte("kvroute/v1\x00" + name)) }

func TestKeysFixedVector(t *testing.T) {
	toks := []uint32{1, 2, 3, 4, 5, 6, 7, 8, 9} // the trailing partial block is not keyed
	root := refRoot(vecModel)
	k0 := refKey(root, toks[:4])
	k1 := refKey(k0, toks[4:8])

	// The documented vector (doc.go) ...
	require.Equal(t, uint64(0x149b9a24d3587105), root)
	require.Equal(t, uint64(0x37c37a75f6e87dae), k0)
	require.Equal(t, uint64(0x42cc08af14b11317), k1)
	// ... equals the package's computation.
	require.Equal(t, Key(root), RootKey(vecModel))
	require.Equal(t, []Key{Key(k0), Key(k1)}, Keys(nil, toks, 4, &KeyParams{Model: vecModel}))
	require.Equal(t, Key(k1), ChainKey(Key(k0), toks[4:8], nil))

	salted := Keys(nil, toks[:8], 4, &KeyParams{Model: vecModel, CacheSalt: "salt-A"})
	s0 := refKey(root, toks[:4], "salt-A")
	require.Equal(t, []Key{Key(s0), Key(refKey(s0, toks[4:8]))}, salted)
	require.Equal(t, []Key{0x0a6049af992907c5, 0x2953dd599689a7dc}, salted)

	lora := Keys(nil, toks[:8], 4, &KeyParams{Model: vecModel, LoRA: "my-lora"})
	l0 := refKey(refRoot("my-lora"), toks[:4])
	require.Equal(t, []Key{Key(l0), Key(refKey(l0, toks[4:8]))}, lora)
	require.Equal(t, []Key{0x7cc13df82df36b29, 0xb47325f35efb46a1}, lora)
}

func TestChainKeyLayoutAllPaths(t *testing.T) {
	// Block sizes around the one-shot buffer limit (256 tokens) and extra
	// keys of various lengths all follow the same byte layout.
	for _, bs := range []int{1, 16, 64, 255, 256, 257, 300, 1024} {
		toks := benchTokens(uint64(bs), bs)
		for _, extra := range [][]string{nil, {""}, {"salt"}, {"img-1", "img-2", string(make([]byte, 2000))}} {
			want := refKey(42, toks, extra...)
			require.Equal(t, Key(want), ChainKey(42, toks, extra), "bs=%d extra=%d", bs, len(extra))
		}
	}
}

func TestModelAndLoRARootsDiffer(t *testing.T) {
	toks := benchTokens(1, 128)
	base := Keys(nil, toks, 64, &KeyParams{Model: "llama"})
	other := Keys(nil, toks, 64, &KeyParams{Model: "qwen"})
	lora := Keys(nil, toks, 64, &KeyParams{Model: "llama", LoRA: "sql-adapter"})
	loraOtherBase := Keys(nil, toks, 64, &KeyParams{Model: "qwen", LoRA: "sql-adapter"})
	require.NotEqual(t, base[0], other[0])
	require.NotEqual(t, base[0], lora[0])
	require.NotEqual(t, base[1], lora[1])
	// The adapter replaces the model at the root.
	require.Equal(t, lora, loraOtherBase)
	require.Equal(t, RootKey("sql-adapter"), Key(refRoot("sql-adapter")))
}

func TestCacheSaltOnlyInBlockZero(t *testing.T) {
	toks := benchTokens(2, 3*16)
	plain := Keys(nil, toks, 16, &KeyParams{Model: "m"})
	salted := Keys(nil, toks, 16, &KeyParams{Model: "m", CacheSalt: "tenant-7"})
	require.Len(t, salted, 3)
	root := refRoot("m")
	s0 := refKey(root, toks[:16], "tenant-7")
	s1 := refKey(s0, toks[16:32]) // no salt on block 1 ...
	s2 := refKey(s1, toks[32:48])
	require.Equal(t, []Key{Key(s0), Key(s1), Key(s2)}, salted)
	// ... but every later key differs through the chain.
	for i := range plain {
		require.NotEqual(t, plain[i], salted[i])
	}
}

func TestMultimodalItemsTaintOverlappingBlocks(t *testing.T) {
	toks := benchTokens(3, 4*8)
	p := &KeyParams{
		Model:     "m",
		CacheSalt: "s",
		MM: []MMItem{
			{Hash: "img-a", Offset: 6, Length: 4},  // blocks 0 and 1
			{Hash: "img-b", Offset: 9, Length: 1},  // block 1
			{Hash: "img-c", Offset: 16, Length: 0}, // empty: no block
			{Hash: "img-d", Offset: 24, Length: 8}, // block 3 exactly
		},
	}
	got := Keys(nil, toks, 8, p)
	k0 := refKey(refRoot("m"), toks[0:8], "img-a", "s") // mm keys first, then the salt
	k1 := refKey(k0, toks[8:16], "img-a", "img-b")
	k2 := refKey(k1, toks[16:24])
	k3 := refKey(k2, toks[24:32], "img-d")
	require.Equal(t, []Key{Key(k0), Key(k1), Key(k2), Key(k3)}, got)
}

func TestKeysEdgeCases(t *testing.T) {
	require.Empty(t, Keys(nil, benchTokens(1, 63), 64, nil))
	require.Empty(t, Keys(nil, benchTokens(1, 64), 0, nil))
	require.Empty(t, Keys(nil, nil, 64, nil))
	// nil params: empty model name, no extra keys.
	toks := benchTokens(1, 64)
	require.Equal(t, []Key{Key(refKey(refRoot(""), toks))}, Keys(nil, toks, 64, nil))
	// dst is reused from index 0.
	dst := []Key{1, 2, 3}
	require.Len(t, Keys(dst, toks, 64, nil), 1)
}

func TestKeysDoNotAllocate(t *testing.T) {
	toks := benchTokens(5, 2048)
	dst := make([]Key, 0, 32)
	p := &KeyParams{Model: "m", CacheSalt: "salt", MM: []MMItem{{Hash: "img", Offset: 100, Length: 300}}}
	allocs := testing.AllocsPerRun(100, func() { dst = Keys(dst, toks, 64, p) })
	require.Zero(t, allocs)
}
