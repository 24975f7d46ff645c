package kvroute

import (
	"context"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/render"
)

// tieWinner returns the index in eps of the endpoint the rendezvous hash
// ranks first for tokens' first block (the tie key of a request nobody
// holds), read from a Selection of r.
func tieWinner(t *testing.T, r *Router, tokens []uint32, eps []Endpoint) int {
	t.Helper()
	s, err := r.Match(context.Background(), &Request{Prompts: []render.Prompt{{TokenIDs: tokens}}}, eps)
	require.NoError(t, err)
	defer s.Release()
	require.NotEmpty(t, s.st.keys)
	best, rank := -1, uint64(0)
	for i, e := range eps {
		if rk := tieRank(s.st.keys[0], e.ID); rk > rank {
			best, rank = i, rk
		}
	}
	return best
}

// loadRouter is a router whose token-load score sees exactly the uncached
// tokens dispatched (no open-request load, no speculative entries), with
// the given tie tolerance.
func loadRouter(t *testing.T, tolerance float64) *Router {
	return testRouter(t, func(c *Config) {
		c.OpenRequestTokens = new(int64(0))
		c.Speculative.Enabled = new(false)
		c.LoadTieTolerance = tolerance
	}, Options{Random: lockedRand(1)})
}

// addLoad commits n uncached tokens of load on eps[i] (a request that only
// that endpoint may serve) and returns its Decision.
func addLoad(t *testing.T, r *Router, seed, n int, eps []Endpoint, i int) *Decision {
	t.Helper()
	return pick(t, r, prompt(seed, n), eps[i:i+1])
}

// With Config.LoadTieTolerance, a new prefix goes to the endpoint its
// rendezvous hash ranks first as long as that endpoint's load is within the
// tolerance (a fraction of the request's own uncached tokens) of the least
// loaded, the edge included; beyond it, or without a tolerance, the least
// loaded wins.
func TestLoadTieToleranceEdges(t *testing.T) {
	const promptTokens = 64 * 8 // 512 uncached tokens on every endpoint
	eps := endpoints(4)
	p := prompt(42, promptTokens)
	for _, tc := range []struct {
		name      string
		tolerance float64
		load      int // on the hash's first endpoint; the others are idle
		hashWins  bool
	}{
		{"off, any load", 0, 64, false},
		{"off, idle", 0, 0, true}, // an exact tie: the hash decides, as before
		{"inside", 0.5, 192, true},
		{"at the edge", 0.5, 256, true}, // 0.5 × 512: tied, the edge included
		{"beyond the edge", 0.5, 320, false},
		{"a whole prompt", 1, 512, true},
		{"beyond a whole prompt", 1, 576, false},
		{"three prompts", 3, 1536, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := loadRouter(t, tc.tolerance)
			h := tieWinner(t, r, p, eps)
			if tc.load > 0 {
				addLoad(t, r, 7, tc.load, eps, h)
			}
			d := pick(t, r, p, eps)
			require.Equal(t, tc.hashWins, d.Endpoint.ID == eps[h].ID, "picked %s, hash ranks %s first", d.Endpoint.ID, eps[h].ID)
			if !tc.hashWins {
				require.NotEqual(t, eps[h].ID, d.Endpoint.ID)
			}
		})
	}
}

// The point of the tolerance: a router that has not yet heard of a peer's
// dispatch (one prompt less on the least-loaded endpoint) places a new
// prefix where the router that knows of it does more often than without a
// tolerance, and always when the tolerance spans the loads' spread.
func TestLoadTieToleranceAgreesWithAStaleView(t *testing.T) {
	const promptTokens = 64 * 8
	eps := endpoints(8)
	agree := func(tolerance float64) int {
		same := 0
		for g := 0; g < 64; g++ {
			exact, stale := loadRouter(t, tolerance), loadRouter(t, tolerance)
			p := prompt(10_000+g, promptTokens)
			// Both see the same spread of loads (multiples of a prompt);
			// the peer's latest dispatch went to the least-loaded endpoint,
			// which only the exact router has heard of.
			least := g % len(eps)
			for i := range eps {
				if i != least {
					n := promptTokens * (1 + (g+i)%3)
					addLoad(t, exact, 100+i, n, eps, i)
					addLoad(t, stale, 100+i, n, eps, i)
				}
			}
			addLoad(t, exact, 99, promptTokens, eps, least)
			if pick(t, exact, p, eps).Endpoint.ID == pick(t, stale, p, eps).Endpoint.ID {
				same++
			}
		}
		return same
	}
	off, two, three := agree(0), agree(2), agree(3)
	require.Less(t, off, 48, "without a tolerance a missed dispatch changes many placements")
	require.Greater(t, two, off+8, "a tolerance of two prompts keeps more of them")
	// The missed prompt moves the least load, hence the edge of the tie:
	// only a tolerance that spans the whole spread (three prompts here)
	// makes the two views agree every time.
	require.Equal(t, 64, three)
}

// The tie-break within the tolerance is deterministic: two routers with
// different random sources and the same loads pick alike, and requests of
// one new prefix (one document, different questions) land together.
func TestLoadTieToleranceIsDeterministic(t *testing.T) {
	eps := endpoints(6)
	mk := func(seed uint64) *Router {
		return testRouter(t, func(c *Config) { c.LoadTieTolerance = 2 }, Options{Random: lockedRand(seed)})
	}
	a, b := mk(1), mk(2)
	for i, n := range []int{300, 900, 1500, 0, 600, 1200} {
		if n > 0 {
			addLoad(t, a, 200+i, n, eps, i)
			addLoad(t, b, 200+i, n, eps, i)
		}
	}
	doc := prompt(5, 64*10)
	var first string
	for q := 0; q < 10; q++ {
		p := append(append([]uint32{}, doc...), prompt(600+q, 64)...)
		da, db := pick(t, a, p, eps), pick(t, b, p, eps)
		require.Equal(t, da.Endpoint.ID, db.Endpoint.ID, "question %d", q)
		if q == 0 {
			first = da.Endpoint.ID
		}
		require.Equal(t, first, da.Endpoint.ID, "question %d of one document", q)
		da.Done(DoneInfo{})
		db.Done(DoneInfo{})
	}
}

// A request without block keys has no tie key: the tolerance does not
// apply, and the least-loaded endpoint wins.
func TestLoadTieToleranceNeedsBlockKeys(t *testing.T) {
	r := loadRouter(t, 100)
	eps := endpoints(3)
	addLoad(t, r, 1, 20, eps, 0)
	addLoad(t, r, 2, 30, eps, 2)
	d := pick(t, r, prompt(3, 10), eps) // shorter than a block
	require.Equal(t, eps[1].ID, d.Endpoint.ID)
}

func TestLoadTieToleranceConfig(t *testing.T) {
	for _, v := range []float64{-1, math.NaN(), math.Inf(1)} {
		c := DefaultConfig()
		c.Model = testModel
		c.LoadTieTolerance = v
		require.ErrorIs(t, c.Validate(), ErrInvalidConfig, "%v", v)
	}
	c, err := LoadConfig(strings.NewReader(`{"model":"m","loadTieTolerance":2.5}`))
	require.NoError(t, err)
	require.Equal(t, 2.5, c.LoadTieTolerance)
	require.Zero(t, DefaultConfig().LoadTieTolerance, "off by default")
	_, err = LoadConfig(strings.NewReader(`{"model":"m","loadTieTolerance":-0.5}`))
	require.ErrorIs(t, err, ErrInvalidConfig)
}
