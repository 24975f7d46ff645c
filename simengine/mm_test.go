package simengine

import (
	"encoding/hex"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestMMBlockHashVectors reproduces vLLM's hashes of blocks that
// multimodal items overlap: sha256 over the canonical CBOR Python's cbor2
// writes for (parent, tokens, extra keys), an item's key being the tuple
// (identifier, offset relative to the block). The vectors were computed
// with Debian's python3-cbor2: hashlib.sha256(cbor2.dumps((parent,
// tuple(tokens), extra_keys), canonical=True)).
func TestMMBlockHashVectors(t *testing.T) {
	mm := func(id string, off int) ExtraKey { return ExtraKey{Value: id, MM: true, Offset: off} }
	cases := []struct {
		name   string
		parent Digest
		tokens []uint32
		keys   []ExtraKey
		cbor   string
		digest string
	}{
		{"an image from token 2", NoneHash, []uint32{1, 2, 3, 4}, []ExtraKey{mm("img-a", 2)},
			"8358209bd96a485ad84efdafb72ee48a1d7a69bcead0f8f0433173941b276b9581eef08401020304818265696d672d6102",
			"56a3ead178b7f80ea57af5a6b236e7420de61d65cbf8c43a606cd87a0595e538"},
		{"LoRA, an image begun in the block before (negative offset), a second image", mustDigest(t, "56a3ead178b7f80ea57af5a6b236e7420de61d65cbf8c43a606cd87a0595e538"),
			[]uint32{5, 6, 7, 8}, []ExtraKey{{Value: "my-lora"}, mm("img-a", -2), mm("img-b", 3)},
			"83582056a3ead178b7f80ea57af5a6b236e7420de61d65cbf8c43a606cd87a0595e538840506070883676d792d6c6f72618265696d672d61218265696d672d6203",
			"45f6739472085a9a09ef7fe342f93e6c17b450f8e06afd388a72fc0bbc7a3347"},
		{"LoRA, image, salt: vLLM's order", NoneHash, []uint32{1, 2, 3, 4}, []ExtraKey{{Value: "my-lora"}, mm("img-a", 2), {Value: "salt-A"}},
			"8358209bd96a485ad84efdafb72ee48a1d7a69bcead0f8f0433173941b276b9581eef0840102030483676d792d6c6f72618265696d672d61026673616c742d41",
			"df8f228bba23373f4cc4425a889dd725c5699a00068feb8914ca504046a8ecd7"},
		{"a two-byte negative offset", NoneHash, []uint32{1, 2, 3, 4}, []ExtraKey{{Value: "my-lora"}, mm("img-a", -300), {Value: "salt-A"}},
			"8358209bd96a485ad84efdafb72ee48a1d7a69bcead0f8f0433173941b276b9581eef0840102030483676d792d6c6f72618265696d672d6139012b6673616c742d41",
			"0b7e00ca3f69236d02bfef34a3af8a14d0e8b5591a2f7220a80d1b78ecb0f689"},
	}
	for _, c := range cases {
		require.Equal(t, c.cbor, hex.EncodeToString(appendBlockCBORKeys(nil, c.parent, c.tokens, c.keys)), c.name)
		d := HashBlockKeys(c.parent, c.tokens, c.keys)
		require.Equal(t, c.digest, hex.EncodeToString(d[:]), c.name)
	}
	// Text keys alone hash as HashBlock's strings do.
	require.Equal(t, HashBlock(NoneHash, []uint32{1, 2, 3, 4}, []string{"my-lora", "s"}),
		HashBlockKeys(NoneHash, []uint32{1, 2, 3, 4}, []ExtraKey{{Value: "my-lora"}, {Value: "s"}}))
	require.Equal(t, HashBlock(NoneHash, []uint32{1, 2, 3, 4}, nil), HashBlockKeys(NoneHash, []uint32{1, 2, 3, 4}, nil))
}

func mustDigest(t *testing.T, s string) Digest {
	var d Digest
	copy(d[:], mustHex(t, s))
	return d
}

// TestMMKeysPerBlock checks which items key which block, as vLLM's
// _gen_mm_extra_hash_keys decides it (block size 4).
func TestMMKeysPerBlock(t *testing.T) {
	items := []MMItem{{"a", 2, 5}, {"b", 7, 1}, {"z", 9, 0}, {"c", 12, 2}}
	// Prompt blocks (all items looked at).
	keys := func(block int) []ExtraKey { return appendMMKeys(nil, items, block*4, block*4+4, block, 4) }
	require.Equal(t, []ExtraKey{{Value: "a", MM: true, Offset: 2}}, keys(0))
	require.Equal(t, []ExtraKey{{Value: "a", MM: true, Offset: -2}, {Value: "b", MM: true, Offset: 3}}, keys(1),
		"the block holds a's end and all of b")
	require.Equal(t, []ExtraKey{{Value: "z", MM: true, Offset: 1}}, keys(2),
		"an empty item strictly inside a block keys it, as in vLLM")
	require.Equal(t, []ExtraKey{{Value: "c", MM: true, Offset: 0}}, keys(3))
	// A block completed by generated tokens looks at the last item only.
	// An 18-token prompt has 4 full blocks; block 4 (tokens 16–19) is
	// filled by decode. Both items overlap it, but vLLM hashes it looking
	// at the last item only.
	last := appendMMKeys(nil, []MMItem{{"a", 16, 1}, {"b", 17, 1}}, 16, 20, 4, 4)
	require.Equal(t, []ExtraKey{{Value: "b", MM: true, Offset: 1}}, last)
	require.Empty(t, appendMMKeys(nil, nil, 0, 4, 0, 1))
}

// TestMMItemsKeyTheEnginesBlocks: the same tokens with the same image hit
// the whole prefix, with another image only the blocks before it; the
// events carry the items' keys, and the digests are vLLM's.
func TestMMItemsKeyTheEnginesBlocks(t *testing.T) {
	e, rec := newTestEngine(t, Config{})
	prompt := seqTokens(1, 17)
	img := func(id string) []MMItem { return []MMItem{{Identifier: id, Offset: 6, Length: 4}} }
	res := run(t, e, Request{Prompt: prompt, MaxTokens: 1, MM: img("cat")})
	require.Zero(t, res.CachedTokens)
	ev := rec.take()
	require.Equal(t, [][]ExtraKey{nil, {{Value: "cat", MM: true, Offset: 2}}, {{Value: "cat", MM: true, Offset: -2}}, nil}, ev[0].ExtraKeys)
	parent := NoneHash
	for i, keys := range ev[0].ExtraKeys {
		parent = HashBlockKeys(parent, prompt[i*4:(i+1)*4], keys)
		require.Equal(t, parent.U64(), ev[0].BlockHashes[i], "block %d", i)
	}

	require.Equal(t, 16, run(t, e, Request{Prompt: prompt, MaxTokens: 1, MM: img("cat")}).CachedTokens)
	require.Equal(t, 4, run(t, e, Request{Prompt: prompt, MaxTokens: 1, MM: img("dog")}).CachedTokens,
		"another image: only the block before it")
	require.Equal(t, 4, run(t, e, Request{Prompt: prompt, MaxTokens: 1}).CachedTokens, "no image: the same")
}

func TestSubmitRejectsBadMMItems(t *testing.T) {
	e, _ := newTestEngine(t, Config{})
	for _, mm := range [][]MMItem{
		{{Identifier: "", Offset: 0, Length: 1}},
		{{Identifier: "a", Offset: -1, Length: 1}},
		{{Identifier: "a", Offset: 0, Length: -1}},
		{{Identifier: "a", Offset: 2, Length: 2}, {Identifier: "b", Offset: 3, Length: 1}},
		{{Identifier: "a", Offset: 6, Length: 3}},
	} {
		_, err := e.Submit(Request{Prompt: seqTokens(1, 8), MaxTokens: 1, MM: mm})
		require.ErrorIs(t, err, ErrMMItems, "%+v", mm)
	}
	_, err := e.Submit(Request{Prompt: seqTokens(1, 8), MaxTokens: 1, MM: []MMItem{{Identifier: "a", Offset: 4, Length: 4}}})
	require.NoError(t, err)
}
