package wire

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// A Format's text form is its name (String), so that a configuration names
// the layout rather than giving its number; every name reads back as its
// Format, and an unknown name or Format is an error.
func TestFormatTextIsItsName(t *testing.T) {
	names := map[Format]string{FormatVLLM: "vllm", FormatVLLMLegacy: "vllm-legacy", FormatSGLang: "sglang",
		FormatVLLMMapBatch: "vllm-map-batch", FormatTRTLLM: "trtllm", FormatSGLangMap: "sglang-map"}
	for f, name := range names {
		text, err := f.MarshalText()
		require.NoError(t, err)
		require.Equal(t, name, string(text))
		var got Format
		require.NoError(t, got.UnmarshalText(text))
		require.Equal(t, f, got)
	}
	require.Len(t, names, len(formatNames), "every Format is named")

	for _, bad := range []string{"", "unknown", "VLLM", "1", "vllm "} {
		got := FormatSGLang
		err := got.UnmarshalText([]byte(bad))
		require.ErrorContains(t, err, `"vllm", "vllm-legacy", "sglang", "vllm-map-batch", "trtllm", "sglang-map"`, "%q", bad)
		require.Equal(t, FormatSGLang, got, "a refused name leaves the Format as it was")
	}
	_, err := (FormatSGLangMap + 1).MarshalText()
	require.ErrorContains(t, err, "unknown wire format 6")
}
