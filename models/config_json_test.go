package models

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/jsonconf/conftest"
)

// A PollConfig decodes by kvroute's configuration rules on its own, not only
// inside a Config: a key in another case, a key given twice and an unknown
// key are errors naming the key, a duration is a duration string, keys not
// present keep the value they had, and what Marshal writes decodes back.
func TestPollConfigDecodesStrictly(t *testing.T) {
	defaults := PollConfig{Interval: DefaultPollInterval, Timeout: DefaultPollTimeout, MaxModels: DefaultMaxModels}
	in := PollConfig{Enabled: true, Interval: 90 * time.Second, Timeout: 250 * time.Millisecond, MaxModels: 7}
	require.NoError(t, conftest.Check(defaults, []conftest.Case[PollConfig]{
		{Name: "case variant", Doc: `{"Interval":"1s"}`, Err: `Interval: unknown key (did you mean "interval"?`},
		{Name: "repeated key", Doc: `{"maxModels":1,"maxModels":2}`, Err: "maxModels: key given twice"},
		{Name: "unknown key", Doc: `{"intervall":"1s"}`, Err: "intervall: unknown key"},
		{Name: "bare number", Doc: `{"timeout":250}`, Err: "timeout: bare number 250 is not a duration"},
		{Name: "duration string", Doc: `{"timeout":"250ms"}`,
			Want: func(c *PollConfig) { c.Timeout = 250 * time.Millisecond }},
		{Name: "absent keys keep defaults", Doc: `{"enabled":true}`,
			Want: func(c *PollConfig) { c.Enabled = true }},
	}, in))
	out, err := json.Marshal(in)
	require.NoError(t, err)
	require.JSONEq(t, `{"enabled":true,"interval":"1m30s","timeout":"250ms","maxModels":7}`, string(out))
}
