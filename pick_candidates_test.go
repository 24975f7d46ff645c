package kvroute

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/render"
	"github.com/kvroute/kvroute/telemetry"
)

// Pick's candidates are the endpoints it is given, whether or not
// SetEndpoints named them (the behaviour the package doc states): an
// endpoint never given to SetEndpoints is picked and its load accounted,
// but no KV events are subscribed for it, so the index knows of its cache
// only the router's own speculative entries.
func TestPickAcceptsEndpointsNeverGivenToSetEndpoints(t *testing.T) {
	// A manual clock: the speculative entries cannot expire between picks.
	r := testRouter(t, func(c *Config) { c.Events.Enabled = new(true) }, Options{Set: telemetry.Set{Clock: newFakeClock()}})
	known := Endpoint{ID: "10.0.0.1:8000", EventsAddress: "tcp://127.0.0.1:1"}
	require.NoError(t, r.SetEndpoints([]Endpoint{known}))
	stranger := Endpoint{ID: "10.0.0.9:8000"}

	req := &Request{Prompts: []render.Prompt{{TokenIDs: prompt(7, 640)}}}
	d, err := r.Pick(context.Background(), req, []Endpoint{stranger})
	require.NoError(t, err)
	require.Equal(t, stranger.ID, d.Endpoint.ID)
	_, open, _ := r.Load().Load(stranger.ID)
	require.Equal(t, int64(1), open, "its load is accounted")
	_, subscribed := r.Events().Status(stranger.ID)
	require.False(t, subscribed, "no KV-event stream for it")
	d.Done(DoneInfo{})

	// Its speculative entries are all the index has of it: a repeat
	// within their TTL sees the first request's blocks on it.
	d, err = r.Pick(context.Background(), &Request{Prompts: req.Prompts}, []Endpoint{known, stranger})
	require.NoError(t, err)
	require.Equal(t, stranger.ID, d.Endpoint.ID)
	require.Positive(t, d.CachedTokens, "speculative entries of the first pick")
	d.Done(DoneInfo{})
}
