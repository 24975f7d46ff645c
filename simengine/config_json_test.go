package simengine

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The engine's Config decodes as every kvroute configuration, wherever it
// is decoded, nested parts included: a duration string works, and a bare
// number (encoding/json's nanoseconds), an unknown key and a key in another
// case are errors naming the key's path. What Marshal writes decodes back.
func TestConfigDecodesStrictly(t *testing.T) {
	var c Config
	require.NoError(t, json.Unmarshal([]byte(`{"model":"m","decodeStep":"10ms","lora":{"maxLoras":2,"loadTime":"100ms"}}`), &c))
	require.Equal(t, Config{Model: "m", DecodeStep: 10 * time.Millisecond, LoRA: &LoRAConfig{MaxLoRAs: 2, LoadTime: 100 * time.Millisecond}}, c)

	for doc, want := range map[string]string{
		`{"decodeStep":10000000}`:         "decodeStep: bare number",
		`{"lora":{"loadTime":100}}`:       "lora.loadTime: bare number",
		`{"decodeStpe":"10ms"}`:           "decodeStpe: unknown key",
		`{"BlockSize":16}`:                "BlockSize: unknown key",
		`{"blockSize":16,"blockSize":32}`: "blockSize",
	} {
		var bad Config
		require.ErrorContains(t, json.Unmarshal([]byte(doc), &bad), want, doc)
	}

	out, err := json.Marshal(c)
	require.NoError(t, err)
	require.Contains(t, string(out), `"decodeStep":"10ms"`)
	var back Config
	require.NoError(t, json.Unmarshal(out, &back))
	require.Equal(t, c, back)
}
