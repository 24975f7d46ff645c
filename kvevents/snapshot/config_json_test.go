package snapshot

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/jsonconf/conftest"
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
	in := ClientConfig{AttemptTimeout: 3 * time.Second, Timeout: 90 * time.Second, Backoff: 250 * time.Millisecond, MaxBytes: 1 << 20}
	require.NoError(t, conftest.Check(defaults, []conftest.Case[ClientConfig]{
		{Name: "case variant", Doc: `{"Backoff":"1s"}`, Err: `Backoff: unknown key (did you mean "backoff"?`},
		{Name: "repeated key", Doc: `{"maxBytes":1,"maxBytes":2}`, Err: "maxBytes: key given twice"},
		{Name: "unknown key", Doc: `{"attemptTimeoutt":"1s"}`, Err: "attemptTimeoutt: unknown key"},
		{Name: "bare number", Doc: `{"backoff":250}`, Err: "backoff: bare number 250 is not a duration"},
		{Name: "non-JSON field", Doc: `{"limiter":{}}`, Err: "limiter: unknown key"},
		{Name: "duration string", Doc: `{"backoff":"250ms"}`, Want: func(c *ClientConfig) { c.Backoff = 250 * time.Millisecond }},
		{Name: "absent keys keep defaults", Doc: `{}`, Want: func(*ClientConfig) {}},
	}, in))
	out, err := json.Marshal(in)
	require.NoError(t, err)
	require.JSONEq(t, `{"attemptTimeout":"3s","timeout":"1m30s","backoff":"250ms","maxBytes":1048576}`, string(out))

	c := defaults
	require.NoError(t, json.Unmarshal([]byte(`{"backoff":"250ms"}`), &c))
	require.Same(t, lim, c.Limiter, "the Limiter, which JSON does not carry, keeps its identity")
}
