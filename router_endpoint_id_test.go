package kvroute

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSetEndpointsBoundsIDs: an endpoint ID labels the per-endpoint metric
// series, so an empty one, one longer than a DNS name and a port, or one
// not UTF-8 is refused with an error naming its entry, and the endpoints
// already set stay as they were.
func TestSetEndpointsBoundsIDs(t *testing.T) {
	r := testRouter(t, nil, Options{})
	eps := endpoints(2)
	require.NoError(t, r.SetEndpoints(eps))

	longest := Endpoint{ID: strings.Repeat("a", 253) + ":8000"}
	require.NoError(t, r.SetEndpoints(append(endpoints(2), longest)))
	require.NoError(t, r.SetEndpoints(eps))

	for name, id := range map[string]string{
		"empty":    "",
		"too long": strings.Repeat("h", 1<<20) + ":8000",
		"not utf8": "\xff:8000",
	} {
		err := r.SetEndpoints(append(endpoints(2), Endpoint{ID: id}))
		require.ErrorIs(t, err, ErrInvalidConfig, name)
		require.ErrorContains(t, err, "endpoints[2]", name)
		require.Less(t, len(err.Error()), 300, name)
		r.mu.Lock()
		got := len(r.endpoints)
		_, kept := r.endpoints[eps[1].ID]
		r.mu.Unlock()
		require.Equal(t, 2, got, name)
		require.True(t, kept, name)
	}
}
