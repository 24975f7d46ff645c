package sidecar

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/jsonconf/conftest"
)

// The sidecar's Config decodes as every kvroute configuration, wherever it
// is decoded: a duration string works, and a bare number (encoding/json's
// nanoseconds), an unknown key and a key in another case are errors naming
// the key. What Marshal writes decodes back.
func TestConfigDecodesStrictly(t *testing.T) {
	good := Config{DecoderURL: "http://127.0.0.1:8001", PrefillTimeout: 2 * time.Second}
	require.NoError(t, conftest.Check(Config{}, []conftest.Case[Config]{
		{Doc: `{"decoderURL":"http://127.0.0.1:8001","prefillTimeout":"2s"}`, Want: func(c *Config) { *c = good }},
		{Doc: `{"prefillTimeout":2000000000}`, Err: "prefillTimeout: bare number"},
		{Doc: `{"prefilTimeout":"2s"}`, Err: "prefilTimeout: unknown key"},
		{Doc: `{"DecoderURL":"http://x:1"}`, Err: "DecoderURL: unknown key"},
		{Doc: `{"maxBodyBytes":1,"maxBodyBytes":2}`, Err: "maxBodyBytes"},
	}, good, `"prefillTimeout":"2s"`))
}
