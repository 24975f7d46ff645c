package gateway

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/disagg/sidecar"
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

// A DisaggHostConfig decodes by kvroute's configuration rules on its own: a
// key in another case, a key given twice and an unknown key are errors
// naming the key's path, a duration is a duration string, keys not present
// keep the value they had (inside exchange too), and what Marshal writes
// decodes back.
func TestDisaggHostConfigDecodesStrictly(t *testing.T) {
	defaults := DisaggHostConfig{Mode: DisaggModeHeader, Exchange: sidecar.Config{PrefillTimeout: 2 * time.Second, MaxBodyBytes: 1 << 20}}
	for _, tc := range []struct {
		name, doc, err string
		want           func(*DisaggHostConfig)
	}{
		{name: "case variant", doc: `{"Mode":"exchange"}`, err: `Mode: unknown key (did you mean "mode"?`},
		{name: "nested case variant", doc: `{"exchange":{"prefillTimeOut":"1s"}}`, err: `exchange.prefillTimeOut: unknown key (did you mean "prefillTimeout"?`},
		{name: "repeated key", doc: `{"mode":"header","mode":"exchange"}`, err: "mode: key given twice"},
		{name: "unknown key", doc: `{"exchange":{"bodyReadTimeout":"1s"}}`, err: "exchange.bodyReadTimeout: unknown key"},
		{name: "bare number", doc: `{"exchange":{"prefillTimeout":250}}`, err: "exchange.prefillTimeout: bare number 250 is not a duration"},
		{name: "duration string", doc: `{"exchange":{"prefillTimeout":"250ms"}}`,
			want: func(c *DisaggHostConfig) { c.Exchange.PrefillTimeout = 250 * time.Millisecond }},
		{name: "absent keys keep defaults", doc: `{"mode":"exchange"}`, want: func(c *DisaggHostConfig) { c.Mode = DisaggModeExchange }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := defaults
			err := json.Unmarshal([]byte(tc.doc), &c)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			want := defaults
			tc.want(&want)
			require.Equal(t, want, c)
		})
	}

	in := DisaggHostConfig{Mode: DisaggModeExchange, Exchange: sidecar.Config{PrefillTimeout: 1500 * time.Millisecond, PrefillerScheme: "https"}}
	out, err := json.Marshal(in)
	require.NoError(t, err)
	require.Contains(t, string(out), `"prefillTimeout":"1.5s"`)
	var back DisaggHostConfig
	require.NoError(t, json.Unmarshal(out, &back))
	require.Equal(t, in, back)
}
