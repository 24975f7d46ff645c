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

// A ServerConfig decodes by kvroute's configuration rules: a key in
// another case, a key given twice and an unknown key are errors naming the
// key, a duration is a duration string, the publisher identity is an array
// of exactly PublisherIDSize bytes, keys not present keep the value they had (the
// zero value: the defaults), and what Marshal writes decodes back.
func TestServerConfigDecodesStrictly(t *testing.T) {
	in := ServerConfig{Addr: "tcp://127.0.0.1:5557", PublisherID: [PublisherIDSize]byte{7, 255}, MaxConns: 8,
		WriteTimeout: 5 * time.Second, IdleTimeout: 90 * time.Second}
	require.NoError(t, conftest.Check(ServerConfig{}, []conftest.Case[ServerConfig]{
		{Name: "case variant", Doc: `{"MaxConns":1}`, Err: `MaxConns: unknown key (did you mean "maxConns"?`},
		{Name: "repeated key", Doc: `{"maxConns":1,"maxConns":2}`, Err: "maxConns: key given twice"},
		{Name: "unknown key", Doc: `{"idleTimeoutt":"1s"}`, Err: "idleTimeoutt: unknown key"},
		{Name: "bare number", Doc: `{"writeTimeout":30}`, Err: "writeTimeout: bare number 30 is not a duration"},
		{Name: "identity byte over 255", Doc: `{"publisherID":[256]}`, Err: "publisherID"},
		{Name: "identity not an array", Doc: `{"publisherID":"abc"}`, Err: "publisherID"},
		{Name: "identity too short", Doc: `{"publisherID":[7,255]}`, Err: "publisherID: 2 bytes, want 16"},
		{Name: "identity too long", Doc: `{"publisherID":[0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,1]}`, Err: "publisherID: 17 bytes, want 16"},
		{Name: "every key", Doc: `{"addr":"tcp://127.0.0.1:5557","publisherID":[7,255,0,0,0,0,0,0,0,0,0,0,0,0,0,0],` +
			`"maxConns":8,"writeTimeout":"5s","idleTimeout":"1m30s"}`,
			Want: func(c *ServerConfig) { *c = in }},
		{Name: "absent keys keep defaults", Doc: `{}`, Want: func(*ServerConfig) {}},
	}, in, `"writeTimeout":"5s"`, `"idleTimeout":"1m30s"`, `"publisherID":[7,255,0,`))
}
