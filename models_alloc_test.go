//go:build !race

package kvroute

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/render"
)

// A one-model Pick allocates exactly what it did before the model step.
func TestPickOneModelAllocatesAsBefore(t *testing.T) {
	r := testRouter(t, func(c *Config) { c.Speculative.Enabled = new(false) }, Options{})
	eps := endpoints(16)
	req := &Request{Prompts: []render.Prompt{{TokenIDs: prompt(1, 1024)}}}
	ctx := context.Background()
	measure := func(pick func(context.Context, *Request, []Endpoint) (*Decision, error)) float64 {
		return testing.AllocsPerRun(200, func() {
			d, err := pick(ctx, req, eps)
			require.NoError(t, err)
			d.Done(DoneInfo{})
			d.Release()
		})
	}
	measure(r.Pick) // warm the pools
	require.Equal(t, measure(r.pickOneModel), measure(r.Pick))
}
