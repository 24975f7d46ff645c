package kvroute

import (
	"context"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/accuracy"
	"github.com/kvroute/kvroute/render"
	"github.com/kvroute/kvroute/telemetry"
	"github.com/kvroute/kvroute/tokenload"
)

func pickWithFallbacks(t *testing.T, r *Router, tokens []uint32, eps []Endpoint, n int) *Decision {
	t.Helper()
	d, err := r.Pick(context.Background(), &Request{Prompts: []render.Prompt{{TokenIDs: tokens}}, Fallbacks: n}, eps)
	require.NoError(t, err)
	return d
}

func ids(cs []Candidate) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.Endpoint.ID
	}
	return out
}

// The fallbacks are the next best candidates by score: with the cache on one
// endpoint and load on another, the pick is the warm endpoint and the
// fallbacks are the idle endpoints before the loaded one, whom the affinity
// filter dropped but who may still serve.
func TestFallbacksAreTheNextBestByScore(t *testing.T) {
	r := testRouter(t, func(c *Config) { c.Speculative.Enabled = new(false) }, Options{})
	eps := endpoints(4)
	p := prompt(1, 1024)
	engineStores(t, r.Index(), eps[2].ID, p, 1)
	busy := pickWithFallbacks(t, r, prompt(9, 4096), []Endpoint{eps[0]}, 0) // load on eps[0]
	defer busy.Done(DoneInfo{})

	d := pickWithFallbacks(t, r, p, eps, 3)
	defer d.Done(DoneInfo{})
	require.Equal(t, eps[2].ID, d.Endpoint.ID)
	require.Len(t, d.Fallbacks, 3)
	require.ElementsMatch(t, []string{eps[1].ID, eps[3].ID}, ids(d.Fallbacks[:2]), "the idle ones first")
	require.Equal(t, eps[0].ID, d.Fallbacks[2].Endpoint.ID, "the loaded one last")
	require.Greater(t, d.Fallbacks[1].Score, d.Fallbacks[2].Score)
	require.EqualValues(t, 1024, d.Fallbacks[0].UncachedTokens, "a fallback knows its own prefill")

	// Fewer asked: the best of them; none asked: nothing ranked.
	d2 := pickWithFallbacks(t, r, p, eps, 1)
	defer d2.Done(DoneInfo{})
	require.Len(t, d2.Fallbacks, 1)
	require.NotEqual(t, eps[0].ID, d2.Fallbacks[0].Endpoint.ID)
	d3 := pickWithFallbacks(t, r, p, eps, 0)
	defer d3.Done(DoneInfo{})
	require.Nil(t, d3.Fallbacks)
	// More asked than there are other candidates: all of them.
	d4 := pickWithFallbacks(t, r, p, eps[1:3], 5)
	defer d4.Done(DoneInfo{})
	require.Equal(t, []string{eps[1].ID}, ids(d4.Fallbacks))
}

// When a fallback served the request, its load moves there: the pick holds
// nothing, the fallback holds the fallback's own uncached tokens and the
// open request, FirstChunk and Done release them there, and the prediction
// checked at Done is the fallback's.
func TestServedMovesTheLoadToTheFallback(t *testing.T) {
	r, _, _ := accRouter(t, func(c *Config) { c.Speculative.Enabled = new(false) })
	eps := endpoints(2)
	p := prompt(1, 320) // 5 blocks
	engineStores(t, r.Index(), eps[0].ID, p, 1)
	d := pickWithFallbacks(t, r, p, eps, 1)
	require.Equal(t, eps[0].ID, d.Endpoint.ID)
	require.Equal(t, []string{eps[1].ID}, ids(d.Fallbacks))
	load := func(id string) (int64, int64) { tok, req, _ := r.Load().Load(id); return tok, req }

	require.False(t, d.Served(eps[0].ID), "the pick itself: nothing moves")
	require.False(t, d.Served("10.9.9.9:8000"), "an endpoint never ranked is not trusted")
	tok, req := load(eps[0].ID)
	require.EqualValues(t, 0, tok, "the warm pick prefills nothing")
	require.EqualValues(t, 1, req)

	require.True(t, d.Served(eps[1].ID))
	require.False(t, d.Served(eps[1].ID), "it moves once")
	tok, req = load(eps[0].ID)
	require.Zero(t, tok)
	require.Zero(t, req, "the pick holds nothing any more")
	tok, req = load(eps[1].ID)
	require.EqualValues(t, 320, tok, "the cold fallback prefills the whole prompt")
	require.EqualValues(t, 1, req)

	d.FirstChunk()
	tok, req = load(eps[1].ID)
	require.Zero(t, tok)
	require.EqualValues(t, 1, req)
	o, ok := d.Done(cached(0))
	require.True(t, ok)
	require.Equal(t, accuracy.Observation{Endpoint: eps[1].ID, Predicted: 0, Actual: 0, Error: 0}, o,
		"the prediction checked is the fallback's, which held nothing")
	tok, req = load(eps[1].ID)
	require.Zero(t, tok)
	require.Zero(t, req)
	require.False(t, d.Served(eps[1].ID), "after Done nothing moves")
}

// Served racing the request's end (the request table, or Done from another
// goroutine) never leaves load behind.
func TestServedRacingDoneLeavesNoLoad(t *testing.T) {
	r := testRouter(t, func(c *Config) { c.Speculative.Enabled = new(false) }, Options{})
	eps := endpoints(2)
	for i := range 200 {
		d := pickWithFallbacks(t, r, prompt(i, 128), eps, 1)
		other := d.Fallbacks[0].Endpoint.ID
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); d.Served(other) }()
		go func() { defer wg.Done(); d.Done(DoneInfo{}) }()
		wg.Wait()
	}
	for _, ep := range eps {
		tok, req, _ := r.Load().Load(ep.ID)
		require.Zero(t, tok, ep.ID)
		require.Zero(t, req, ep.ID)
	}
}

// A prefill-only pick ends whole at its first chunk (Request.PrefillOnly),
// also when a fallback served it: after Served, FirstChunk releases the
// fallback's prompt tokens and its open request, and the pick holds nothing.
func TestServedPrefillOnlyEndsOnTheFallbackAtFirstChunk(t *testing.T) {
	r := testRouter(t, func(c *Config) { c.Speculative.Enabled = new(false) }, Options{})
	eps := endpoints(2)
	d, err := r.Pick(context.Background(), &Request{Prompts: []render.Prompt{{TokenIDs: prompt(1, 320)}},
		PrefillOnly: true, Fallbacks: 1}, eps)
	require.NoError(t, err)
	require.Len(t, d.Fallbacks, 1)
	fb := d.Fallbacks[0].Endpoint.ID
	require.True(t, d.Served(fb))
	_, req, _ := r.Load().Load(fb)
	require.EqualValues(t, 1, req, "the fallback holds the open request")
	d.FirstChunk()
	for _, ep := range eps {
		tok, req, _ := r.Load().Load(ep.ID)
		require.Zero(t, tok, "%s: prompt tokens released at the first chunk", ep.ID)
		require.Zero(t, req, "%s: a prefill-only part ends whole at its first chunk", ep.ID)
	}
	d.Done(DoneInfo{})
}

// Served racing FirstChunk leaves no prompt tokens on the fallback: a first
// chunk that arrives after Served read that none had come, and before it
// recorded the move, is applied to the fallback by Served. The tracker's
// load observer, which Served's dispatch to the fallback calls at exactly
// that point, runs the FirstChunk there deterministically.
func TestServedRacingFirstChunkReleasesTheFallbacksPromptTokens(t *testing.T) {
	r := testRouter(t, func(c *Config) { c.Speculative.Enabled = new(false) }, Options{})
	eps := endpoints(2)
	d := pickWithFallbacks(t, r, prompt(1, 320), eps, 1)
	fb := d.Fallbacks[0].Endpoint.ID
	require.Positive(t, d.Fallbacks[0].UncachedTokens)
	r.Load().SetObserver(func(ep string, tokens, requests int64) {
		if ep == fb && requests == 1 {
			d.FirstChunk() // the first chunk arrives on another goroutine right now
		}
	})
	require.True(t, d.Served(fb))
	r.Load().SetObserver(nil)
	for _, ep := range eps {
		tok, _, _ := r.Load().Load(ep.ID)
		require.Zero(t, tok, "%s: the first chunk came, no prompt tokens are held", ep.ID)
	}
	_, req, _ := r.Load().Load(fb)
	require.EqualValues(t, 1, req, "the fallback holds the open request until Done")
	d.Done(DoneInfo{})
	_, req, _ = r.Load().Load(fb)
	require.Zero(t, req)
}

// Served racing Done returns false and changes nothing, as for a request
// that had ended before it: a Done that lands after Served's checks and
// before it recorded the move leaves no load on the fallback and gives it
// no speculative index entries. The load observer runs the Done at that
// point deterministically.
func TestServedRacingDoneReturnsFalse(t *testing.T) {
	r := testRouter(t, nil, Options{}) // speculation on
	eps := endpoints(2)
	p := prompt(1, 320)
	d := pickWithFallbacks(t, r, p, eps, 1)
	fb := d.Fallbacks[0].Endpoint.ID
	r.Load().SetObserver(func(ep string, tokens, requests int64) {
		if ep == fb && requests == 1 {
			d.Done(DoneInfo{}) // the request ends on another goroutine right now
		}
	})
	moved := d.Served(fb)
	r.Load().SetObserver(nil)
	require.False(t, moved, "the request had ended: nothing moved")
	for _, ep := range eps {
		tok, req, _ := r.Load().Load(ep.ID)
		require.Zero(t, tok, ep.ID)
		require.Zero(t, req, ep.ID)
	}
	s, err := r.Match(context.Background(), &Request{Prompts: []render.Prompt{{TokenIDs: p}}}, eps)
	require.NoError(t, err)
	defer s.Release()
	for i := range s.Len() {
		if c := s.Candidate(i); c.Endpoint.ID == fb {
			require.Zero(t, c.Match.Blocks, "no speculative entries on the fallback")
		}
	}
}

// A request moved to a fallback that had left the pool recreates that
// endpoint's load counters; once it has ended, the next SetEndpoints drops
// them with their gauge series (while it is in flight they stay), so
// endpoint churn does not grow the tracker.
func TestSetEndpointsDropsCountersServedRecreated(t *testing.T) {
	reg := prometheus.NewRegistry()
	r := testRouter(t, func(c *Config) { c.Speculative.Enabled = new(false) },
		Options{Set: telemetry.Set{Registerer: reg}})
	eps := endpoints(2)
	require.NoError(t, r.SetEndpoints(eps))
	d := pickWithFallbacks(t, r, prompt(1, 320), eps, 1)
	fb := d.Fallbacks[0].Endpoint.ID
	require.NoError(t, r.SetEndpoints([]Endpoint{d.Endpoint})) // the fallback leaves the pool
	_, _, had := r.Load().Load(fb)
	require.False(t, had, "removed: its counters dropped")

	require.True(t, d.Served(fb)) // the gateway's retry reached it before it was gone
	_, req, has := r.Load().Load(fb)
	require.True(t, has)
	require.EqualValues(t, 1, req)
	require.NoError(t, r.SetEndpoints([]Endpoint{d.Endpoint}))
	_, req, _ = r.Load().Load(fb)
	require.EqualValues(t, 1, req, "kept while its request is in flight")

	d.Done(DoneInfo{})
	_, ok := gathered(t, reg, tokenload.InflightRequestsMetric, fb)
	require.True(t, ok, "idle until the next SetEndpoints")
	require.NoError(t, r.SetEndpoints([]Endpoint{d.Endpoint}))
	_, _, has = r.Load().Load(fb)
	require.False(t, has, "ended: its counters dropped (the tracker holds %d endpoints)", r.Load().Len())
	require.Equal(t, 1, r.Load().Len())
	for _, name := range []string{tokenload.InflightTokensMetric, tokenload.InflightRequestsMetric} {
		_, ok := gathered(t, reg, name, fb)
		require.False(t, ok, "%s{endpoint_name=%q} is gone", name, fb)
	}
}

// With a Profile that picks in several roles, each role's Decision names
// its fallbacks among that role's candidates, and each moves on its own.
func TestFallbacksPerRole(t *testing.T) {
	r := testRouter(t, func(c *Config) { c.Speculative.Enabled = new(false) }, Options{Profile: prefillDecode{}})
	eps := endpoints(6)
	for i := range eps {
		role := "decode"
		if i%2 == 1 {
			role = "prefill"
		}
		eps[i].Labels = map[string]string{"role": role}
	}
	d := pickWithFallbacks(t, r, prompt(7, 256), eps, 2)
	require.Len(t, d.Roles, 1)
	p := d.Roles[0]
	role := func(id string) string {
		for _, e := range eps {
			if e.ID == id {
				return e.Labels["role"]
			}
		}
		return ""
	}
	require.Len(t, d.Fallbacks, 2)
	require.Len(t, p.Fallbacks, 2)
	for _, f := range d.Fallbacks {
		require.Equal(t, "decode", role(f.Endpoint.ID))
	}
	for _, f := range p.Fallbacks {
		require.Equal(t, "prefill", role(f.Endpoint.ID))
	}
	require.True(t, p.Served(p.Fallbacks[0].Endpoint.ID), "the prefill role moves on its own")
	_, req, _ := r.Load().Load(p.Fallbacks[0].Endpoint.ID)
	require.EqualValues(t, 1, req)
	d.Done(DoneInfo{})
	for _, e := range eps {
		tok, req, _ := r.Load().Load(e.ID)
		require.Zero(t, tok+req, e.ID)
	}
}

// With speculation on, the fallback that served gets the request's
// speculative index entries, so the next request with the same prefix finds
// it warm there.
func TestServedSpeculatesOnTheFallback(t *testing.T) {
	r := testRouter(t, nil, Options{})
	eps := endpoints(2)
	p := prompt(3, 320) // 5 blocks
	d := pickWithFallbacks(t, r, p, eps, 1)
	fallback := d.Fallbacks[0].Endpoint.ID
	held := func(id string) int {
		s, err := r.Match(context.Background(), &Request{Prompts: []render.Prompt{{TokenIDs: p}}}, eps)
		require.NoError(t, err)
		defer s.Release()
		for i := range s.Len() {
			if c := s.Candidate(i); c.Endpoint.ID == id {
				return c.Match.Blocks
			}
		}
		return -1
	}
	require.Equal(t, 5, held(d.Endpoint.ID), "the pick's speculative entries")
	require.Zero(t, held(fallback))
	require.True(t, d.Served(fallback))
	require.Equal(t, 5, held(fallback), "the fallback holds the prefix now")
	d.Done(DoneInfo{})
}
