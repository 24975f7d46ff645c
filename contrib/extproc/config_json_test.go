package extproc

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// The picker's Config decodes strictly, as every kvroute configuration: an
// unknown key, another case of a known one and a key given twice are errors
// naming the key (encoding/json alone would take "MaxBodyBytes" for
// maxBodyBytes and keep the last of two), and what Marshal writes decodes
// back to the same Config.
func TestConfigDecodesStrictly(t *testing.T) {
	var c Config
	require.NoError(t, json.Unmarshal([]byte(`{"model":"m","maxBodyBytes":1024,"fallbacks":2}`), &c))
	require.Equal(t, Config{Model: "m", MaxBodyBytes: 1024, Fallbacks: 2}, c)

	for doc, key := range map[string]string{
		`{"fallback":2}`:                      "fallback: unknown key",
		`{"MaxBodyBytes":1024}`:               "MaxBodyBytes: unknown key",
		`{"destinationheader":"x-dest"}`:      "destinationheader: unknown key",
		`{"fallbacks":1,"fallbacks":2}`:       "fallbacks",
		`{"conformanceTestHooks":"yes"}`:      "conformanceTestHooks",
		`{"model":"m","servedKey":{"a":1}}`:   "servedKey",
		`{"maxBodyBytesInFlight":"1024"}`:     "maxBodyBytesInFlight",
		`{"model":"m","metadataNamespace":1}`: "metadataNamespace",
	} {
		var bad Config
		require.ErrorContains(t, json.Unmarshal([]byte(doc), &bad), key, doc)
	}

	out, err := json.Marshal(c)
	require.NoError(t, err)
	var back Config
	require.NoError(t, json.Unmarshal(out, &back))
	require.Equal(t, c, back)
}
