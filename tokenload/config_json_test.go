package tokenload_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/tokenload"
)

// A request table's configuration decodes strictly on its own: a bare number
// for its TTL (once read as nanoseconds) and an unknown key are errors
// naming the key.
func TestRequestTableConfigDecodesStrictly(t *testing.T) {
	var c tokenload.RequestTableConfig
	require.NoError(t, json.Unmarshal([]byte(`{"ttl":"250ms","maxRequests":7}`), &c))
	require.Equal(t, tokenload.RequestTableConfig{TTL: 250 * time.Millisecond, MaxRequests: 7}, c)

	var bare tokenload.RequestTableConfig
	require.ErrorContains(t, json.Unmarshal([]byte(`{"ttl":250}`), &bare), "ttl: bare number 250 is not a duration")
	require.ErrorContains(t, json.Unmarshal([]byte(`{"maxRequest":7}`), &bare), "maxRequest: unknown key")

	_, err := tokenload.LoadRequestTableConfig(strings.NewReader(`{"ttl":"30m","bogus":1}`))
	require.ErrorContains(t, err, "bogus: unknown key")
	got, err := tokenload.LoadRequestTableConfig(strings.NewReader(`{"ttl":"30m"}`))
	require.NoError(t, err)
	require.Equal(t, 30*time.Minute, got.TTL)
	_, err = tokenload.LoadRequestTableConfig(strings.NewReader(`{"maxRequests":-1}`)) // LoadRequestTableConfig validates
	require.ErrorContains(t, err, "maxRequests -1 is negative")

	out, err := json.Marshal(c)
	require.NoError(t, err)
	require.JSONEq(t, `{"maxRequests":7,"ttl":"250ms"}`, string(out))
}
