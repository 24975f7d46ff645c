package kvroute

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/jsonconf/conftest"
)

// The Router's own sub-configurations decode by kvroute's configuration
// rules on their own, not only inside a Config: an unknown key, a key in
// another case and a bare number for a duration are errors naming the key,
// keys not present keep their value, and what Marshal writes decodes back.
func TestRootSubConfigsDecodeStrictlyOnTheirOwn(t *testing.T) {
	on := true
	require.NoError(t, conftest.Check(SpeculativeConfig{TTL: time.Second}, []conftest.Case[SpeculativeConfig]{
		{Name: "unknown key", Doc: `{"ttll":"1s"}`, Err: "ttll: unknown key"},
		{Name: "case variant", Doc: `{"TTL":"1s"}`, Err: `TTL: unknown key (did you mean "ttl"?`},
		{Name: "bare number", Doc: `{"ttl":250}`, Err: "ttl: bare number 250 is not a duration"},
		{Name: "duration string", Doc: `{"ttl":"250ms"}`, Want: func(c *SpeculativeConfig) { c.TTL = 250 * time.Millisecond }},
		{Name: "absent keys keep their value", Doc: `{"enabled":true}`, Want: func(c *SpeculativeConfig) { c.Enabled = &on }},
	}, SpeculativeConfig{Enabled: &on, TTL: 1500 * time.Millisecond}, `"ttl":"1.5s"`))

	require.NoError(t, conftest.Check(ReadinessConfig{}, []conftest.Case[ReadinessConfig]{
		{Name: "unknown key", Doc: `{"giveUp":"1m"}`, Err: "giveUp: unknown key"},
		{Name: "bare number", Doc: `{"giveUpAfter":60}`, Err: "giveUpAfter: bare number 60 is not a duration"},
		{Name: "duration string", Doc: `{"giveUpAfter":"-1s"}`, Want: func(c *ReadinessConfig) { c.GiveUpAfter = -time.Second }},
	}, ReadinessConfig{GiveUpAfter: 3 * time.Minute}, `"giveUpAfter":"3m0s"`))

	require.NoError(t, conftest.Check(MetricLabelsConfig{}, []conftest.Case[MetricLabelsConfig]{
		{Name: "unknown key", Doc: `{"renderer":{"a":"b"}}`, Err: "renderer: unknown key"},
		{Name: "repeated key", Doc: `{"render":{},"render":{}}`, Err: "render: key given twice"},
		{Name: "labels", Doc: `{"render":{"plugin_name":"p"}}`,
			Want: func(c *MetricLabelsConfig) { c.Render = map[string]string{"plugin_name": "p"} }},
	}, MetricLabelsConfig{Affinity: map[string]string{"plugin_name": "x"}}))
}
