package publish

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/kvevents/wire"
)

// The wire format is named in JSON ("format": "sglang-map"), as the
// configuration names everything else, and reads back as written; a number
// (the Format's value) or an unknown name is an error naming the key.
func TestConfigFormatIsANameInJSON(t *testing.T) {
	var cfg Config
	require.NoError(t, json.Unmarshal([]byte(`{"format": "sglang-map"}`), &cfg))
	require.Equal(t, wire.FormatSGLangMap, cfg.Format)

	out, err := json.Marshal(Config{Format: wire.FormatTRTLLM})
	require.NoError(t, err)
	require.Contains(t, string(out), `"format":"trtllm"`)
	var back Config
	require.NoError(t, json.Unmarshal(out, &back))
	require.Equal(t, wire.FormatTRTLLM, back.Format)

	out, err = json.Marshal(Config{})
	require.NoError(t, err)
	require.Contains(t, string(out), `"format":"vllm"`, "the zero value is vLLM's current layout")

	const names = ` (want one of "vllm", "vllm-legacy", "sglang", "vllm-map-batch", "trtllm", "sglang-map")`
	for doc, want := range map[string]string{
		`{"format": 1}`:       `format: want a string, got the number 1`,
		`{"format": "vllm2"}`: `format: wire: unknown format "vllm2"` + names,
		`{"format": ""}`:      `format: wire: unknown format ""` + names,
	} {
		cfg := Config{Format: wire.FormatSGLang}
		require.EqualError(t, json.Unmarshal([]byte(doc), &cfg), want, doc)
		require.Equal(t, wire.FormatSGLang, cfg.Format, "a refused value leaves the Format as it was")
	}

	_, err = json.Marshal(Config{Format: wire.FormatSGLangMap + 1})
	require.ErrorContains(t, err, "unknown wire format", "an unknown Format is not written as a number")
}
