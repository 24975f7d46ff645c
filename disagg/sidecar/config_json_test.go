package sidecar

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The sidecar's Config decodes as every kvroute configuration, wherever it
// is decoded: a duration string works, and a bare number (encoding/json's
// nanoseconds), an unknown key and a key in another case are errors naming
// the key. What Marshal writes decodes back.
func TestConfigDecodesStrictly(t *testing.T) {
	var c Config
	require.NoError(t, json.Unmarshal([]byte(`{"decoderURL":"http://127.0.0.1:8001","prefillTimeout":"2s"}`), &c))
	require.Equal(t, Config{DecoderURL: "http://127.0.0.1:8001", PrefillTimeout: 2 * time.Second}, c)

	for doc, want := range map[string]string{
		`{"prefillTimeout":2000000000}`:       "prefillTimeout: bare number",
		`{"prefilTimeout":"2s"}`:              "prefilTimeout: unknown key",
		`{"DecoderURL":"http://x:1"}`:         "DecoderURL: unknown key",
		`{"maxBodyBytes":1,"maxBodyBytes":2}`: "maxBodyBytes",
	} {
		var bad Config
		require.ErrorContains(t, json.Unmarshal([]byte(doc), &bad), want, doc)
	}

	out, err := json.Marshal(c)
	require.NoError(t, err)
	require.Contains(t, string(out), `"prefillTimeout":"2s"`)
	var back Config
	require.NoError(t, json.Unmarshal(out, &back))
	require.Equal(t, c, back)
}
