package render

import (
	"context"
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// A response cap of math.MaxInt64 (no practical cap) renders as any other:
// the read past the cap, one byte more than it, must not overflow into a
// negative limit that reads nothing and fails every render as a decode
// error.
func TestMaxResponseBytesAtMaxInt64Renders(t *testing.T) {
	s := newFakeVLLM(t, "a")
	c := newTestClient(t, func(c *Config) { c.MaxResponseBytes = math.MaxInt64 }, s)
	res, err := c.Render(context.Background(), completions("hi"))
	require.NoError(t, err)
	require.Equal(t, textTokens("hi"), res.Prompts[0].TokenIDs)
	res, err = c.Render(context.Background(), chat("hi"))
	require.NoError(t, err)
	require.NotEmpty(t, res.Prompts[0].TokenIDs)
}
