package kvindex

import (
	"encoding/binary"
	"math/bits"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/zeebo/xxh3"
)

const vecModel = "meta-llama/Llama-3.1-8B-Instruct"

// refKey computes one block key the slow, obvious way: build the byte string
// of the documented block layout, hash it with xxh3.Hash in one shot (the package streams
// extra keys) and chain it
// with the documented mix, written out with math/bits.
func refKey(parent uint64, tokens []uint32, extra ...string) uint64 {
	var b []byte
	for _, t := range tokens {
		b = binary.LittleEndian.AppendUint32(b, t)
	}
	for _, e := range extra {
		b = binary.LittleEndian.AppendUint64(b, uint64(len(e)))
		b = append(b, e...)
	}
	return refChain(parent, xxh3.Hash(b))
}

// refChain is the documented chaining step.
func refChain(parent, block uint64) uint64 {
	_, x := bits.Mul64(block, 0x9E3779B97F4A7C15)
	x ^= parent
	for _, step := range []struct {
		shift uint
		mul   uint64
	}{{30, 0xBF58476D1CE4E5B9}, {27, 0x94D049BB133111EB}} {
		x ^= x >> step.shift
		_, x = bits.Mul64(x, step.mul)
	}
	return x ^ x>>31
}

func refRoot(name string) uint64 { return xxh3.Hash([]byte("kvroute/v2\x00" + name)) }

func TestKeySchemeVersion(t *testing.T) {
	// The version is part of the root domain; a new layout bumps both.
	require.Equal(t, 2, KeySchemeVersion)
	require.Equal(t, "kvroute/v2\x00", rootDomain)
}

func TestChainIsBijectiveInEachArgument(t *testing.T) {
	// Distinct block hashes under one parent, and one block hash under
	// distinct parents, never share a key (checked on structured inputs,
	// where a weak mix would collide first).
	seen := map[Key]struct{}{}
	for i := uint64(0); i < 1<<12; i++ {
		seen[Chain(7, i)] = struct{}{}
		seen[Chain(Key(i<<52), 7)] = struct{}{}
	}
	require.Len(t, seen, 2<<12)
	// Avalanche: flipping one input bit flips about half the key bits.
	var flips int
	for b := 0; b < 64; b++ {
		flips += bits.OnesCount64(uint64(Chain(1, 2) ^ Chain(1, 2^1<<b)))
		flips += bits.OnesCount64(uint64(Chain(1, 2) ^ Chain(1^1<<b, 2)))
	}
	require.InDelta(t, 32, float64(flips)/128, 4)
	require.Equal(t, BlockHash([]uint32{1, 2}, []string{"x"}), xxh3.Hash([]byte{1, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 'x'}))
}

func TestKeysFixedVector(t *testing.T) {
	toks := []uint32{1, 2, 3, 4, 5, 6, 7, 8, 9} // the trailing partial block is not keyed
	root := refRoot(vecModel)
	k0 := refKey(root, toks[:4])
	k1 := refKey(k0, toks[4:8])

	// The documented vector (doc.go) ...
	require.Equal(t, uint64(0xea84fc0a0a397c3b), root)
	require.Equal(t, uint64(0x81f89a972b4283c4), k0)
	require.Equal(t, uint64(0x1d524bc5a49dcdab), k1)
	// ... equals the package's computation.
	require.Equal(t, Key(root), RootKey(vecModel))
	require.Equal(t, []Key{Key(k0), Key(k1)}, Keys(nil, toks, 4, &KeyParams{Model: vecModel}))
	require.Equal(t, Key(k1), ChainKey(Key(k0), toks[4:8], nil))

	salted := Keys(nil, toks[:8], 4, &KeyParams{Model: vecModel, CacheSalt: "salt-A"})
	s0 := refKey(root, toks[:4], "salt-A")
	require.Equal(t, []Key{Key(s0), Key(refKey(s0, toks[4:8]))}, salted)
	require.Equal(t, []Key{0x688150cfe3bd79ec, 0xb8e3a445291bb21b}, salted)

	lora := Keys(nil, toks[:8], 4, &KeyParams{Model: vecModel, LoRA: "my-lora"})
	l0 := refKey(refRoot("my-lora"), toks[:4])
	require.Equal(t, []Key{Key(l0), Key(refKey(l0, toks[4:8]))}, lora)
	require.Equal(t, []Key{0x036410385835a330, 0x62e30e0b2c19a01f}, lora)
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
	// Names past the one-shot stack buffer take the streaming path.
	for _, n := range []int{116, 117, 118, 300} {
		long := string(make([]byte, n))
		require.Equal(t, Key(refRoot(long)), RootKey(long), "name of %d bytes", n)
	}
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

// MMPrefix is part of each multimodal item's extra key: the keys are those
// of items whose identifier is the prefix followed by the hash, on every
// block an item overlaps, and the cache salt stays unprefixed.
func TestMMPrefixIsPartOfEachItemsExtraKey(t *testing.T) {
	toks := benchTokens(4, 4*8)
	items := []MMItem{{Hash: "img-a", Offset: 6, Length: 4}, {Hash: "img-b", Offset: 24, Length: 8}}
	got := Keys(nil, toks, 8, &KeyParams{Model: "m", LoRA: "ad", CacheSalt: "s", MM: items, MMPrefix: []byte("ad:")})
	k0 := refKey(refRoot("ad"), toks[0:8], "ad:img-a", "s")
	k1 := refKey(k0, toks[8:16], "ad:img-a")
	k2 := refKey(k1, toks[16:24])
	k3 := refKey(k2, toks[24:32], "ad:img-b")
	require.Equal(t, []Key{Key(k0), Key(k1), Key(k2), Key(k3)}, got)

	// The same keys as items whose Hash carries the prefix itself (an
	// event's extra keys), and other keys than the bare hashes.
	whole := []MMItem{{Hash: "ad:img-a", Offset: 6, Length: 4}, {Hash: "ad:img-b", Offset: 24, Length: 8}}
	require.Equal(t, got, Keys(nil, toks, 8, &KeyParams{Model: "m", LoRA: "ad", CacheSalt: "s", MM: whole}))
	bare := Keys(nil, toks, 8, &KeyParams{Model: "m", LoRA: "ad", CacheSalt: "s", MM: items})
	for _, i := range []int{0, 1, 3} {
		require.NotEqual(t, got[i], bare[i], "block %d", i)
	}
	require.Equal(t, Keys(nil, toks[:8*3], 8, &KeyParams{Model: "m", MMPrefix: []byte("ad:")}),
		Keys(nil, toks[:8*3], 8, &KeyParams{Model: "m"}), "without items the prefix keys nothing")
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
	p.MMPrefix = []byte("adapter:")
	allocs = testing.AllocsPerRun(100, func() { dst = Keys(dst, toks, 64, p) })
	require.Zero(t, allocs)
}
