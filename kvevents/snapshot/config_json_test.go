package snapshot

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A ClientConfig decodes by kvroute's configuration rules on its own, not
// only inside a kvevents PoolConfig: a key in another case, a key given
// twice and an unknown key are errors naming the key, a duration is a
// duration string, keys not present keep the value they had (the
// non-JSON Limiter too), and what Marshal writes decodes back.
func TestClientConfigDecodesStrictly(t *testing.T) {
	lim := NewLimiter(2)
	defaults := ClientConfig{AttemptTimeout: DefaultAttemptTimeout, Timeout: DefaultTimeout,
		Backoff: DefaultBackoff, MaxBytes: DefaultMaxBytes, Limiter: lim}
	for _, tc := range []struct {
		name, doc, err string
		want           func(*ClientConfig)
	}{
		{name: "case variant", doc: `{"Backoff":"1s"}`, err: `Backoff: unknown key (did you mean "backoff"?`},
		{name: "repeated key", doc: `{"maxBytes":1,"maxBytes":2}`, err: "maxBytes: key given twice"},
		{name: "unknown key", doc: `{"attemptTimeoutt":"1s"}`, err: "attemptTimeoutt: unknown key"},
		{name: "bare number", doc: `{"backoff":250}`, err: "backoff: bare number 250 is not a duration"},
		{name: "non-JSON field", doc: `{"limiter":{}}`, err: "limiter: unknown key"},
		{name: "duration string", doc: `{"backoff":"250ms"}`, want: func(c *ClientConfig) { c.Backoff = 250 * time.Millisecond }},
		{name: "absent keys keep defaults", doc: `{}`, want: func(*ClientConfig) {}},
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
			require.Same(t, lim, c.Limiter)
		})
	}

	in := ClientConfig{AttemptTimeout: 3 * time.Second, Timeout: 90 * time.Second, Backoff: 250 * time.Millisecond, MaxBytes: 1 << 20}
	out, err := json.Marshal(in)
	require.NoError(t, err)
	require.JSONEq(t, `{"attemptTimeout":"3s","timeout":"1m30s","backoff":"250ms","maxBytes":1048576}`, string(out))
	var back ClientConfig
	require.NoError(t, json.Unmarshal(out, &back))
	require.Equal(t, in, back)
}
