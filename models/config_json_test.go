package models

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A PollConfig decodes by kvroute's configuration rules on its own, not only
// inside a Config: a key in another case, a key given twice and an unknown
// key are errors naming the key, a duration is a duration string, keys not
// present keep the value they had, and what Marshal writes decodes back.
func TestPollConfigDecodesStrictly(t *testing.T) {
	defaults := PollConfig{Interval: DefaultPollInterval, Timeout: DefaultPollTimeout, MaxModels: DefaultMaxModels}
	for _, tc := range []struct {
		name, doc, err string
		want           PollConfig
	}{
		{name: "case variant", doc: `{"Interval":"1s"}`, err: `Interval: unknown key (did you mean "interval"?`},
		{name: "repeated key", doc: `{"maxModels":1,"maxModels":2}`, err: "maxModels: key given twice"},
		{name: "unknown key", doc: `{"intervall":"1s"}`, err: "intervall: unknown key"},
		{name: "bare number", doc: `{"timeout":250}`, err: "timeout: bare number 250 is not a duration"},
		{name: "duration string", doc: `{"timeout":"250ms"}`,
			want: PollConfig{Interval: DefaultPollInterval, Timeout: 250 * time.Millisecond, MaxModels: DefaultMaxModels}},
		{name: "absent keys keep defaults", doc: `{"enabled":true}`,
			want: PollConfig{Enabled: true, Interval: DefaultPollInterval, Timeout: DefaultPollTimeout, MaxModels: DefaultMaxModels}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := defaults
			err := json.Unmarshal([]byte(tc.doc), &c)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, c)
		})
	}

	in := PollConfig{Enabled: true, Interval: 90 * time.Second, Timeout: 250 * time.Millisecond, MaxModels: 7}
	out, err := json.Marshal(in)
	require.NoError(t, err)
	require.JSONEq(t, `{"enabled":true,"interval":"1m30s","timeout":"250ms","maxModels":7}`, string(out))
	var back PollConfig
	require.NoError(t, json.Unmarshal(out, &back))
	require.Equal(t, in, back)
}
