package server

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/jsonconf/conftest"

	"github.com/kvroute/kvroute/simengine"
)

// The server's Config decodes as every kvroute configuration, wherever it
// is decoded, its engine's part included: a duration string works, and a
// bare number (encoding/json's nanoseconds), an unknown key and a key in
// another case are errors naming the key's path. What Marshal writes
// decodes back.
func TestConfigDecodesStrictly(t *testing.T) {
	good := Config{Model: "m", RenderTokenCost: time.Millisecond, Engine: simengine.Config{DecodeStep: 5 * time.Millisecond}}
	require.NoError(t, conftest.Check(Config{}, []conftest.Case[Config]{
		{Doc: `{"model":"m","renderTokenCost":"1ms","engine":{"decodeStep":"5ms"}}`, Want: func(c *Config) { *c = good }},
		{Doc: `{"renderTokenCost":1000000}`, Err: "renderTokenCost: bare number"},
		{Doc: `{"engine":{"decodeStep":5000000}}`, Err: "engine.decodeStep: bare number"},
		{Doc: `{"engine":{"DecodeStep":"5ms"}}`, Err: "engine.DecodeStep: unknown key"},
		{Doc: `{"Model":"m"}`, Err: "Model: unknown key"},
		{Doc: `{"renderWorkers":1,"renderWorkers":2}`, Err: "renderWorkers"},
	}, good, `"renderTokenCost":"1ms"`))
}

// A PDConfig decodes by kvroute's configuration rules on its own, not only
// inside a Config: a key in another case, a key given twice and an unknown
// key are errors naming the key, a duration is a duration string, keys not
// present keep the value they had, and what Marshal writes decodes back.
func TestPDConfigDecodesStrictly(t *testing.T) {
	defaults := PDConfig{Role: RolePrefill, TransferTimePerToken: DefaultTransferTimePerToken,
		TransferTimeout: DefaultTransferTimeout, LeaseTTL: DefaultLeaseTTL, MaxLeases: DefaultMaxLeases}
	in := PDConfig{Role: RoleDecode, EngineID: "e", AdvertiseHost: "10.0.0.1", TransferTimePerToken: 5 * time.Microsecond,
		TransferTimeout: 3 * time.Second, LeaseTTL: 8 * time.Minute, MaxLeases: 10, KVLoadFailurePolicy: PolicyFail}
	require.NoError(t, conftest.Check(defaults, []conftest.Case[PDConfig]{
		{Name: "case variant", Doc: `{"engineId":"e"}`, Err: `engineId: unknown key (did you mean "engineID"?`},
		{Name: "repeated key", Doc: `{"role":"prefill","role":"decode"}`, Err: "role: key given twice"},
		{Name: "unknown key", Doc: `{"leaseTtl2":"1s"}`, Err: "leaseTtl2: unknown key"},
		{Name: "bare number", Doc: `{"transferTimeout":250}`, Err: "transferTimeout: bare number 250 is not a duration"},
		{Name: "duration string", Doc: `{"transferTimeout":"250ms"}`, Want: func(c *PDConfig) { c.TransferTimeout = 250 * time.Millisecond }},
		{Name: "absent keys keep defaults", Doc: `{"engineID":"e1"}`, Want: func(c *PDConfig) { c.EngineID = "e1" }},
	}, in, `"transferTimePerToken":"5µs"`, `"leaseTTL":"8m0s"`))
}
