package publish

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// The sizes a Publisher allocates by are bounded where the configuration is
// read: a bufferSize past the bound made New panic allocating the replay
// ring, and a sendQueue past it made every connecting subscriber's
// goroutine panic (the process with it).
func TestConfigBoundsSizes(t *testing.T) {
	for _, c := range []struct {
		doc, err string
	}{
		{`{"bufferSize": 4194304, "sendQueue": 1048576, "replaySendHWM": 1048576}`, ""},
		{`{"bufferSize": 4194305}`, "bufferSize 4194305 must be at most 4194304"},
		{`{"bufferSize": 35184372088832}`, "bufferSize 35184372088832 must be at most 4194304"},
		{`{"sendQueue": 1048577}`, "sendQueue 1048577 must be at most 1048576"},
		{`{"sendQueue": 9223372036854775807}`, "sendQueue 9223372036854775807 must be at most 1048576"},
		{`{"replaySendHWM": 1048577}`, "replaySendHWM: replay: sendHWM 1048577 must be at most 1048576"},
	} {
		var cfg Config
		require.NoError(t, cfg.UnmarshalJSON([]byte(c.doc)), c.doc)
		err := cfg.Validate()
		if c.err == "" {
			require.NoError(t, err, c.doc)
			continue
		}
		require.ErrorContains(t, err, c.err, c.doc)
		cfg.Addr, cfg.ReplayAddr = "127.0.0.1:0", "127.0.0.1:0"
		_, err = New(cfg, Options{})
		require.ErrorContains(t, err, c.err, "New refuses it before allocating or binding")
	}
}
