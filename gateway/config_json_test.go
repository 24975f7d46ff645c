package gateway

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/jsonconf/conftest"

	"github.com/kvroute/kvroute/disagg/sidecar"
)

// The gateway's Config decodes as every kvroute configuration, wherever it
// is decoded: a duration string works, and a bare number (encoding/json's
// nanoseconds), an unknown key and a key in another case are errors naming
// the key. What Marshal writes decodes back.
func TestConfigDecodesStrictly(t *testing.T) {
	good := Config{Model: "m", BodyReadTimeout: 30 * time.Second, ResponseWriteTimeout: 5 * time.Minute}
	require.NoError(t, conftest.Check(Config{}, []conftest.Case[Config]{
		{Doc: `{"model":"m","bodyReadTimeout":"30s","responseWriteTimeout":"5m"}`, Want: func(c *Config) { *c = good }},
		{Doc: `{"bodyReadTimeout":30}`, Err: "bodyReadTimeout: bare number"},
		{Doc: `{"bodyReadTimout":"30s"}`, Err: "bodyReadTimout: unknown key"},
		{Doc: `{"MaxBodyBytes":1024}`, Err: "MaxBodyBytes: unknown key"},
		{Doc: `{"maxBodyBytes":1,"maxBodyBytes":2}`, Err: "maxBodyBytes"},
	}, good, `"bodyReadTimeout":"30s"`))
}

// A DisaggHostConfig decodes by kvroute's configuration rules on its own: a
// key in another case, a key given twice and an unknown key are errors
// naming the key's path, a duration is a duration string, keys not present
// keep the value they had (inside exchange too), and what Marshal writes
// decodes back.
func TestDisaggHostConfigDecodesStrictly(t *testing.T) {
	defaults := DisaggHostConfig{Mode: DisaggModeHeader, Exchange: sidecar.Config{PrefillTimeout: 2 * time.Second, MaxBodyBytes: 1 << 20}}
	in := DisaggHostConfig{Mode: DisaggModeExchange, Exchange: sidecar.Config{PrefillTimeout: 1500 * time.Millisecond, PrefillerScheme: "https"}}
	require.NoError(t, conftest.Check(defaults, []conftest.Case[DisaggHostConfig]{
		{Name: "case variant", Doc: `{"Mode":"exchange"}`, Err: `Mode: unknown key (did you mean "mode"?`},
		{Name: "nested case variant", Doc: `{"exchange":{"prefillTimeOut":"1s"}}`, Err: `exchange.prefillTimeOut: unknown key (did you mean "prefillTimeout"?`},
		{Name: "repeated key", Doc: `{"mode":"header","mode":"exchange"}`, Err: "mode: key given twice"},
		{Name: "unknown key", Doc: `{"exchange":{"bodyReadTimeout":"1s"}}`, Err: "exchange.bodyReadTimeout: unknown key"},
		{Name: "bare number", Doc: `{"exchange":{"prefillTimeout":250}}`, Err: "exchange.prefillTimeout: bare number 250 is not a duration"},
		{Name: "duration string", Doc: `{"exchange":{"prefillTimeout":"250ms"}}`,
			Want: func(c *DisaggHostConfig) { c.Exchange.PrefillTimeout = 250 * time.Millisecond }},
		{Name: "absent keys keep defaults", Doc: `{"mode":"exchange"}`, Want: func(c *DisaggHostConfig) { c.Mode = DisaggModeExchange }},
	}, in, `"prefillTimeout":"1.5s"`))
}
