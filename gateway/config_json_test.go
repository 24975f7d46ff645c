package gateway

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The gateway's Config decodes as every kvroute configuration, wherever it
// is decoded: a duration string works, and a bare number (encoding/json's
// nanoseconds), an unknown key and a key in another case are errors naming
// the key. What Marshal writes decodes back.
func TestConfigDecodesStrictly(t *testing.T) {
	var c Config
	require.NoError(t, json.Unmarshal([]byte(`{"model":"m","bodyReadTimeout":"30s","responseWriteTimeout":"5m"}`), &c))
	require.Equal(t, Config{Model: "m", BodyReadTimeout: 30 * time.Second, ResponseWriteTimeout: 5 * time.Minute}, c)

	for doc, want := range map[string]string{
		`{"bodyReadTimeout":30}`:              "bodyReadTimeout: bare number",
		`{"bodyReadTimout":"30s"}`:            "bodyReadTimout: unknown key",
		`{"MaxBodyBytes":1024}`:               "MaxBodyBytes: unknown key",
		`{"maxBodyBytes":1,"maxBodyBytes":2}`: "maxBodyBytes",
	} {
		var bad Config
		require.ErrorContains(t, json.Unmarshal([]byte(doc), &bad), want, doc)
	}

	out, err := json.Marshal(c)
	require.NoError(t, err)
	require.Contains(t, string(out), `"bodyReadTimeout":"30s"`)
	var back Config
	require.NoError(t, json.Unmarshal(out, &back))
	require.Equal(t, c, back)
}
