package simengine

import (
	"encoding/hex"
	"testing"

	"github.com/stretchr/testify/require"
)

func mustHex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	require.NoError(t, err)
	return b
}

// TestBlockHashVectors reproduces vLLM's own block hashes (sha256_cbor, seed
// "vllm-none-hash", tokens [1,2,3,4 | 5,6,7,8], block size 4): NONE_HASH,
// both chained blocks and block 1 salted with "salt-A".
func TestBlockHashVectors(t *testing.T) {
	require.Equal(t, "9bd96a485ad84efdafb72ee48a1d7a69bcead0f8f0433173941b276b9581eef0", hex.EncodeToString(NoneHash[:]))

	b1 := HashBlock(NoneHash, []uint32{1, 2, 3, 4}, nil)
	require.Equal(t, "58d0879dff3800f65f8c5fd449d73048c0f7699dd238a03b84b146b151d55111", hex.EncodeToString(b1[:]))
	require.Equal(t, uint64(9561501211280363793), b1.U64())

	b2 := HashBlock(b1, []uint32{5, 6, 7, 8}, nil)
	require.Equal(t, "e1bc29393a2da9fd798f35ff04d215f846aee6df4b803ce3d43b57df56b58fb1", hex.EncodeToString(b2[:]))
	require.Equal(t, uint64(15292913576410714033), b2.U64())

	salted := HashBlock(NoneHash, []uint32{1, 2, 3, 4}, []string{"salt-A"})
	require.Equal(t, "a5b03a254718001203d698fed1675e0637cef58c1500e67519c90c43a8092e56", hex.EncodeToString(salted[:]))
	require.Equal(t, uint64(1858029805988556374), salted.U64())

	// Empty extra keys hash like None, as vLLM passes None for "no keys".
	require.Equal(t, b1, HashBlock(NoneHash, []uint32{1, 2, 3, 4}, []string{}))
}

// TestBlockCBORBytes checks the canonical CBOR bytes that vLLM hashes for
// those blocks.
func TestBlockCBORBytes(t *testing.T) {
	seed := appendCBORHead(nil, cborText, uint64(len(NoneHashSeed)))
	seed = append(seed, NoneHashSeed...)
	require.Equal(t, mustHex(t, "6e766c6c6d2d6e6f6e652d68617368"), seed)

	want := mustHex(t, "835820"+"9bd96a485ad84efdafb72ee48a1d7a69bcead0f8f0433173941b276b9581eef0"+"8401020304f6")
	require.Equal(t, want, AppendBlockCBOR(nil, NoneHash, []uint32{1, 2, 3, 4}, nil))

	var zero Digest
	got := AppendBlockCBOR(nil, zero, []uint32{23, 24, 255, 256, 65535, 65536, 1<<32 - 1}, []string{"ab"})
	wantTail := "87" + "17" + "1818" + "18ff" + "190100" + "19ffff" + "1a00010000" + "1affffffff" + "81" + "626162"
	require.Equal(t, "835820"+hex.EncodeToString(zero[:])+wantTail, hex.EncodeToString(got))
}

func TestCBORHeadLengths(t *testing.T) {
	for _, c := range []struct {
		n    uint64
		want string
	}{{0, "80"}, {23, "97"}, {24, "9818"}, {256, "990100"}, {1 << 16, "9a00010000"}, {1 << 32, "9b0000000100000000"}} {
		require.Equal(t, c.want, hex.EncodeToString(appendCBORHead(nil, cborArray, c.n)), c.n)
	}
}
