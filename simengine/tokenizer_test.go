package simengine

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestTokenizePieces(t *testing.T) {
	want := []uint32{TokenID("Hello"), TokenID(","), TokenID(" world"), TokenID("!"), TokenID("\n"),
		TokenID(" "), TokenID(" x"), TokenID(" ("), TokenID("42"), TokenID(")")}
	require.Equal(t, want, Tokenize(nil, "Hello, world!\n  x (42)"))
	// Identical across calls and instances: a pure function of the text.
	require.Equal(t, Tokenize(nil, "the same text"), Tokenize(nil, "the same text"))
	// A known ID pins the documented hash (FNV-1a-32 mod 100000 + 1000), so a
	// change of the tokenizer breaks this test rather than silently changing IDs.
	require.Equal(t, uint32(TokenOffset+0x4f9f2cab%VocabSize), TokenID("hello"))
	for _, id := range Tokenize(nil, "ünïcödé wörds, 漢字 and \xff bytes") {
		require.GreaterOrEqual(t, id, uint32(TokenOffset))
		require.Less(t, id, uint32(TokenOffset+VocabSize))
	}
}

func TestTokenizeSplitsLongPieces(t *testing.T) {
	long := "abcdefghijklmnopqrstuvwxyz0123456789"
	require.Equal(t, []uint32{TokenID(long[:16]), TokenID(long[16:32]), TokenID(long[32:])}, Tokenize(nil, long))
	// Multi-byte runes are never cut in half.
	got := Tokenize(nil, "ééééééééééé") // 22 bytes
	require.Equal(t, []uint32{TokenID("éééééééé"), TokenID("ééé")}, got)
}

func TestGeneratedTextRetokenizes(t *testing.T) {
	seen := map[string]bool{}
	for _, w := range genWords {
		require.False(t, seen[w], "duplicate generation word %q", w)
		seen[w] = true
	}
	seed := promptSeed([]uint32{1, 2, 3})
	var ids []uint32
	for k := range 50 {
		ids = append(ids, generatedToken(seed, k))
	}
	require.Equal(t, ids, Tokenize(nil, Detokenize(ids)))
	require.Equal(t, "<|user|><12345>", Detokenize([]uint32{TokenUser, 12345}))
}

func TestApplyChatTemplate(t *testing.T) {
	got, err := ApplyChatTemplate(nil, []Message{{"system", "Be brief."}, {"user", "Hi"}}, `[{"name":"f"}]`, true)
	require.NoError(t, err)
	want := []uint32{TokenTools}
	want = Tokenize(want, `[{"name":"f"}]`)
	want = append(want, TokenEnd, TokenSystem)
	want = Tokenize(want, "Be brief.")
	want = append(want, TokenEnd, TokenUser, TokenID("Hi"), TokenEnd, TokenAssistant)
	require.Equal(t, want, got)

	_, err = ApplyChatTemplate(nil, []Message{{"wizard", "x"}}, "", true)
	require.ErrorIs(t, err, ErrUnknownRole)
}
