package render

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// A renderer removed from the set loses its idle connections at once
// (before, they stayed open until a render to it, which never came); the
// others keep theirs.
func TestSetEndpointsClosesARemovedRenderersConnections(t *testing.T) {
	a, b := newFakeVLLM(t, "a"), newFakeVLLM(t, "b")
	c, err := New(DefaultConfig(), Options{})
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.SetEndpoints([]Endpoint{{ID: "a", URL: a.URL}, {ID: "b", URL: b.URL}}))
	for range 4 { // round-robin: two each
		_, err := c.Render(context.Background(), completions("x"))
		require.NoError(t, err)
	}
	hostA, hostB := strings.TrimPrefix(a.URL, "http://"), strings.TrimPrefix(b.URL, "http://")
	open := c.transport.OpenConns()
	require.Positive(t, open[hostA])
	require.Positive(t, open[hostB])

	require.NoError(t, c.SetEndpoints([]Endpoint{{ID: "b", URL: b.URL}}))
	require.Equal(t, map[string]int{hostB: open[hostB]}, c.transport.OpenConns())
	_, err = c.Render(context.Background(), completions("x"))
	require.NoError(t, err, "the renderer left still renders")
}
