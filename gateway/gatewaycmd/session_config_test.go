package gatewaycmd

import (
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestConfigFileSessionSection(t *testing.T) {
	cfg := writeFile(t, "gateway.yaml", `
model: m
gateway:
  session:
    headers: [x-conversation-id]
    ttl: 90s
    maxEntries: 1000
    derive: true
`)
	o, err := parseFlags([]string{"--config", cfg, "--endpoints", "10.0.0.1:8000"}, io.Discard, io.Discard)
	require.NoError(t, err)
	s := o.server.Session
	require.NotNil(t, s)
	require.Equal(t, []string{"x-conversation-id"}, s.Headers)
	require.Equal(t, 90*time.Second, s.TTL)
	require.True(t, s.Derive)

	o, err = parseFlags([]string{"--config", writeFile(t, "r.yaml", "model: m\n"), "--endpoints", "10.0.0.1:8000"}, io.Discard, io.Discard)
	require.NoError(t, err)
	require.Nil(t, o.server.Session, "no section: no session affinity")

	for doc, want := range map[string]string{
		"gateway:\n  session:\n    ttl: 30\n":            "gateway.session.ttl: bare number 30 is not a duration",
		"gateway:\n  session:\n    tll: 1s\n":            "gateway.session.tll: unknown key",
		"gateway:\n  session:\n    weight: -1\n":         "gateway.session",
		"gateway:\n  session:\n    headers: [\"a b\"]\n": "gateway.session",
	} {
		_, err := parseFlags([]string{"--config", writeFile(t, "bad.yaml", "model: m\n"+doc), "--endpoints", "10.0.0.1:8000"}, io.Discard, io.Discard)
		require.ErrorContains(t, err, want, doc)
	}
}
