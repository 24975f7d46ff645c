package replay

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The replay client's and server's configurations decode strictly on their
// own: a bare number for a duration and an unknown key are errors naming
// the key, and a duration string works.
func TestConfigsDecodeStrictly(t *testing.T) {
	var c ClientConfig
	require.NoError(t, json.Unmarshal([]byte(`{"timeout":"250ms"}`), &c))
	require.Equal(t, 250*time.Millisecond, c.Timeout)
	require.ErrorContains(t, json.Unmarshal([]byte(`{"timeout":250}`), &c), "timeout: bare number 250 is not a duration")
	require.ErrorContains(t, json.Unmarshal([]byte(`{"timeoutt":"1s"}`), &c), "timeoutt: unknown key")

	var s ServerConfig
	require.ErrorContains(t, json.Unmarshal([]byte(`{"bogus":1}`), &s), "bogus: unknown key")
}
