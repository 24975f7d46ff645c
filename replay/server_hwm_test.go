package replay

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// sendHWM sizes a queue each client connection allocates when it connects:
// a value past the bound is refused where the configuration is read, not
// met as a panic in the connection's goroutine when a client connects.
func TestServerConfigBoundsSendHWM(t *testing.T) {
	for _, c := range []struct {
		doc, err string
	}{
		{`{"sendHWM": 1000}`, ""},
		{`{"sendHWM": 1048576}`, ""},
		{`{"sendHWM": 1048577}`, "sendHWM 1048577 must be at most 1048576"},
		{`{"sendHWM": 9223372036854775807}`, "sendHWM 9223372036854775807 must be at most 1048576"},
	} {
		var cfg ServerConfig
		require.NoError(t, cfg.UnmarshalJSON([]byte(c.doc)), c.doc)
		err := cfg.Validate()
		if c.err == "" {
			require.NoError(t, err, c.doc)
			continue
		}
		require.ErrorContains(t, err, c.err, c.doc)
		_, err = NewServer(cfg, NewBuffer(1), Options{})
		require.ErrorContains(t, err, c.err, "NewServer refuses it before binding")
	}
}
