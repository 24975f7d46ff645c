package session_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/session"
)

// The derived key reads a body's opening as the engine reads the body: by
// exact member names (a case variant is an unknown member, ignored) and
// the last of a repeated name, nothing merged. Each body is keyed as its
// plain equivalent is.
func TestDerivedKeyReadsMembersAsTheEngine(t *testing.T) {
	a, err := session.New(session.Config{Derive: true}, session.Options{})
	require.NoError(t, err)
	key := func(body string) string {
		k, err := a.Key(&kvroute.Request{Body: []byte(body)})
		require.NoError(t, err)
		return k
	}
	for _, c := range []struct{ name, body, plain string }{
		{"case variant of messages", `{"messages":[{"role":"user","content":"a"}],"Messages":[{"role":"user","content":"b"}]}`,
			`{"messages":[{"role":"user","content":"a"}]}`},
		{"case variant of model", `{"model":"m","MODEL":"other","messages":[{"role":"user","content":"a"}]}`,
			`{"model":"m","messages":[{"role":"user","content":"a"}]}`},
		{"case variant of system", `{"System":"sys","messages":[{"role":"user","content":"a"}]}`,
			`{"messages":[{"role":"user","content":"a"}]}`},
		{"case variant of role", `{"messages":[{"role":"system","ROLE":"user","content":"s"},{"role":"user","content":"a"}]}`,
			`{"messages":[{"role":"system","content":"s"},{"role":"user","content":"a"}]}`},
		{"case variant of content", `{"messages":[{"role":"user","content":"a","Content":"b"}]}`,
			`{"messages":[{"role":"user","content":"a"}]}`},
		{"repeated messages: no element reused", `{"messages":[{"role":"user","content":"x"}],"messages":[{"content":"s"},{"role":"user","content":"a"}]}`,
			`{"messages":[{"content":"s"},{"role":"user","content":"a"}]}`},
		{"repeated model: the last", `{"model":"x","model":"m","messages":[{"role":"user","content":"a"}]}`,
			`{"model":"m","messages":[{"role":"user","content":"a"}]}`},
		{"responses input", `{"Instructions":"x","input":[{"role":"user","content":"a"}]}`,
			`{"input":[{"role":"user","content":"a"}]}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			want := key(c.plain)
			require.NotEmpty(t, want)
			require.Equal(t, want, key(c.body))
		})
	}
	// A case variant alone is no list of messages: no opening, no key.
	require.Empty(t, key(`{"Messages":[{"role":"user","content":"a"}]}`))
	require.Empty(t, key(`{"messages":[{"Role":"user","content":"a"}]}`))
}
