package kvindex

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/zeebo/xxh3"
)

// fullRangeTokens returns n tokens spread over all 32 bits (benchTokens
// stays below 150,000, which leaves the upper halves of the 64-bit words
// the kernels multiply almost empty).
func fullRangeTokens(seed uint64, n int) []uint32 {
	r := rand.New(rand.NewPCG(seed, seed^0x5bd1e995))
	t := make([]uint32, n)
	for i := range t {
		t[i] = r.Uint32()
	}
	return t
}

// withBothKernels runs f with the machine's kernels (AVX2 on amd64 when
// present) and again with the portable xxh3.Hash path.
func withBothKernels(t *testing.T, f func(t *testing.T)) {
	t.Run("kernel", f)
	saved := useAVX2
	useAVX2 = false
	defer func() { useAVX2 = saved }()
	t.Run("generic", f)
}

// refKeys chains refKey over every full block of tokens from root.
func refKeys(root uint64, tokens []uint32, bs int) []Key {
	var out []Key
	for i := 0; i+bs <= len(tokens); i += bs {
		root = refKey(root, tokens[i:i+bs])
		out = append(out, Key(root))
	}
	return out
}

func TestHashBlock64IsXXH3(t *testing.T) {
	withBothKernels(t, func(t *testing.T) {
		blocks := [][]uint32{make([]uint32, 64), fullRangeTokens(0, 64)}
		ones := make([]uint32, 64)
		for i := range ones {
			ones[i] = ^uint32(0)
		}
		blocks = append(blocks, ones)
		for s := uint64(1); s < 500; s++ {
			blocks = append(blocks, fullRangeTokens(s, 64), benchTokens(s, 64))
		}
		// Every bit of every token position, starting from one block.
		base := fullRangeTokens(7, 64)
		for bit := 0; bit < 64*32; bit++ {
			b := append([]uint32(nil), base...)
			b[bit/32] ^= 1 << (bit % 32)
			blocks = append(blocks, b)
		}
		seen := make(map[uint64]struct{}, len(blocks))
		for i, b := range blocks {
			var bytes []byte
			for _, tok := range b {
				bytes = binary.LittleEndian.AppendUint32(bytes, tok)
			}
			want := xxh3.Hash(bytes)
			require.Equal(t, want, hashBlock64((*[64]uint32)(b)), "block %d", i)
			require.Equal(t, want, BlockHash(b, nil), "block %d", i)
			seen[want] = struct{}{}
		}
		require.Len(t, seen, len(blocks), "distinct blocks collided")
	})
}

func TestKeysDefaultBlockSizeMatchesLayout(t *testing.T) {
	withBothKernels(t, func(t *testing.T) {
		root := refRoot(vecModel)
		// Block counts around the kernel's chunk (keysChunk), trailing
		// partial blocks, and a token slice that starts off 8-byte
		// alignment.
		for _, n := range []int{0, 1, 63, 64, 65, 127, 128, 2048, 2049, 64*keysChunk - 1, 64 * keysChunk, 64*keysChunk + 64, 2*64*keysChunk + 130} {
			toks := fullRangeTokens(uint64(n), n+1)[1:]
			want := refKeys(root, toks, 64)
			got := Keys(nil, toks, 64, &KeyParams{Model: vecModel})
			require.Equal(t, len(want), len(got), "n=%d", n)
			if len(want) > 0 {
				require.Equal(t, want, got, "n=%d", n)
			}
			// The event side (ChainKey, as Index.Store uses it) meets
			// the request side.
			parent := RootKey(vecModel)
			for i := range got {
				parent = ChainKey(parent, toks[64*i:64*i+64], nil)
				require.Equal(t, got[i], parent, "n=%d block %d", n, i)
			}
		}
	})
}

func TestKeysDefaultBlockSizeFixedVector(t *testing.T) {
	// The block-size-64 vector of the package doc: tokens 0…127 under the
	// vector model, two blocks.
	toks := make([]uint32, 128)
	for i := range toks {
		toks[i] = uint32(i)
	}
	want := refKeys(refRoot(vecModel), toks, 64)
	withBothKernels(t, func(t *testing.T) {
		require.Equal(t, []Key{0xac98ef48a9a04e2f, 0xecc97da21eadd486}, want)
		require.Equal(t, want, Keys(nil, toks, 64, &KeyParams{Model: vecModel}))
	})
}

func TestKeysDefaultBlockSizeDoNotAllocate(t *testing.T) {
	toks := fullRangeTokens(3, 2048)
	dst := make([]Key, 0, 32)
	p := &KeyParams{Model: vecModel}
	require.Zero(t, testing.AllocsPerRun(100, func() { dst = Keys(dst, toks, 64, p) }))
	require.Len(t, dst, 32)
	// dst is reused from index 0 and grown when too short.
	short := []Key{1, 2}
	require.Equal(t, dst, Keys(short, toks, 64, p))
}

// FuzzKeysDefaultBlockSize checks Keys at the default block size (the
// kernel path) against the documented layout for arbitrary tokens.
func FuzzKeysDefaultBlockSize(f *testing.F) {
	f.Add(make([]byte, 4*64), "m", uint8(0))
	f.Add(make([]byte, 4*200), "", uint8(3))
	seed := make([]byte, 4*130)
	for i := range seed {
		seed[i] = byte(i * 37)
	}
	f.Add(seed, vecModel, uint8(1))
	f.Fuzz(func(t *testing.T, raw []byte, model string, skip uint8) {
		tokens := make([]uint32, len(raw)/4)
		for i := range tokens {
			tokens[i] = binary.LittleEndian.Uint32(raw[4*i:])
		}
		// Start at an arbitrary token so the kernel sees any alignment.
		tokens = tokens[min(int(skip%4), len(tokens)):]
		got := Keys(nil, tokens, 64, &KeyParams{Model: model})
		want := refKeys(refRoot(model), tokens, 64)
		if len(got) != len(want) {
			t.Fatalf("got %d keys, want %d", len(got), len(want))
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("key %d = %x, want %x", i, got[i], want[i])
			}
		}
	})
}
