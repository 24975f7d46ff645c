package server

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/simengine"
)

// The server's Config decodes as every kvroute configuration, wherever it
// is decoded, its engine's part included: a duration string works, and a
// bare number (encoding/json's nanoseconds), an unknown key and a key in
// another case are errors naming the key's path. What Marshal writes
// decodes back.
func TestConfigDecodesStrictly(t *testing.T) {
	var c Config
	require.NoError(t, json.Unmarshal([]byte(`{"model":"m","renderTokenCost":"1ms","engine":{"decodeStep":"5ms"}}`), &c))
	require.Equal(t, Config{Model: "m", RenderTokenCost: time.Millisecond, Engine: simengine.Config{DecodeStep: 5 * time.Millisecond}}, c)

	for doc, want := range map[string]string{
		`{"renderTokenCost":1000000}`:           "renderTokenCost: bare number",
		`{"engine":{"decodeStep":5000000}}`:     "engine.decodeStep: bare number",
		`{"engine":{"DecodeStep":"5ms"}}`:       "engine.DecodeStep: unknown key",
		`{"Model":"m"}`:                         "Model: unknown key",
		`{"renderWorkers":1,"renderWorkers":2}`: "renderWorkers",
	} {
		var bad Config
		require.ErrorContains(t, json.Unmarshal([]byte(doc), &bad), want, doc)
	}

	out, err := json.Marshal(c)
	require.NoError(t, err)
	require.Contains(t, string(out), `"renderTokenCost":"1ms"`)
	var back Config
	require.NoError(t, json.Unmarshal(out, &back))
	require.Equal(t, c, back)
}
