package kvroute

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/affinity"
	"github.com/kvroute/kvroute/render"
	"github.com/kvroute/kvroute/tokenload"
)

// TestPickCountsOpenRequests: two endpoints with no committed prefill
// tokens, the first still streaming three answers. With the default
// OpenRequestTokens the idle one wins; with 0 (the former behaviour) the two
// score the same.
func TestPickCountsOpenRequests(t *testing.T) {
	for _, tc := range []struct {
		name    string
		perOpen int64
		tie     bool
	}{{"default", *DefaultConfig().OpenRequestTokens, false}, {"disabled", 0, true}} {
		t.Run(tc.name, func(t *testing.T) {
			r := testRouter(t, func(c *Config) { c.OpenRequestTokens = new(tc.perOpen) }, Options{})
			eps := endpoints(2)
			require.NoError(t, r.SetEndpoints(eps))
			for i := 0; i < 3; i++ { // three requests streaming on eps[0]
				h := r.Load().Dispatch(eps[0].ID, 4096)
				h.FirstChunk()
			}
			tok, open, _ := r.Load().Load(eps[0].ID)
			require.Zero(t, tok)
			require.Equal(t, int64(3), open)
			req := &Request{Prompts: []render.Prompt{{TokenIDs: prompt(7, 1000)}}}
			s, err := r.Match(context.Background(), req, eps)
			require.NoError(t, err)
			defer s.Release()
			s.Score()
			busy, idle := s.Candidate(0).Score, s.Candidate(1).Score
			if tc.tie {
				require.Equal(t, busy, idle)
				return
			}
			require.Greater(t, idle, busy)
			d, err := s.Commit(1)
			require.NoError(t, err)
			defer d.Done(DoneInfo{})
			require.Equal(t, affinity.OutcomeNoMatch, d.Outcome)
			best, _ := s.Score()
			require.Equal(t, 1, best)
		})
	}
}

func TestConfigRejectsNegativeOpenRequestTokens(t *testing.T) {
	cfg := DefaultConfig()
	cfg.OpenRequestTokens = new(int64(-1))
	require.ErrorIs(t, cfg.Validate(), ErrInvalidConfig)
	require.Equal(t, int64(1024), *DefaultConfig().OpenRequestTokens)
}

// A weight that is not a finite number would make the scores NaN or
// infinite, and every pick then the first candidate whatever its load (an
// infinite LoadWeight scores a saturated endpoint Inf×0 = NaN, and no
// later score compares greater): Config.Validate refuses a non-finite
// LoadWeight, New a non-finite weight of Options.Scorers.
func TestNonFiniteWeightsAreInvalid(t *testing.T) {
	for _, w := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		cfg := DefaultConfig()
		cfg.Model = testModel
		cfg.LoadWeight = w
		require.ErrorIs(t, cfg.Validate(), ErrInvalidConfig, "loadWeight %v", w)
		cfg.LoadWeight = 0
		_, err := New(context.Background(), cfg, Options{Scorers: []WeightedScorer{{Scorer: constScorer(1), Weight: w}}})
		require.ErrorIs(t, err, ErrInvalidConfig, "scorer weight %v", w)
	}
	// A finite weight, however large, still sends a request to the idle
	// endpoint rather than the saturated one.
	r := testRouter(t, func(c *Config) {
		c.LoadWeight = math.MaxFloat64
		c.QueueThresholdTokens = 100
	}, Options{Scorers: []WeightedScorer{{Scorer: constScorer(1), Weight: -2}}})
	eps := endpoints(2)
	busy := r.Load().Dispatch(eps[0].ID, 1_000) // far over the queue threshold
	defer busy.Done()
	d, err := r.Pick(context.Background(), &Request{}, eps) // no prompts: by load alone
	require.NoError(t, err)
	defer d.Done(DoneInfo{})
	require.Equal(t, eps[1].ID, d.Endpoint.ID, "the idle endpoint, not the saturated one (score %v)", d.Score)
}

// constScorer scores every candidate the same.
type constScorer float64

func (c constScorer) Score(*Selection, int) float64 { return float64(c) }

// TestScoreKeptIsScore holds the score stage's loop for the token-load
// scorer alone (scoreKept, the score written out) to the scorer's Score of
// each kept candidate, on random loads, open requests and matches
// (negative, huge and NaN ones among them), threshold and weights.
func TestScoreKeptIsScore(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for range 2_000 {
		n := 1 + r.IntN(64)
		total := r.IntN(40)
		s := &Selection{}
		s.unc = tokenload.NewUncached(total*16+r.IntN(32), total, 16)
		s.st.cands = make([]affinity.Candidate, n)
		s.st.open, s.st.weighted, s.st.scores = make([]int64, n), make([]float64, n), make([]float64, n)
		for i := range n {
			s.st.cands[i].InFlightTokens = []int64{0, r.Int64N(1 << 20), -r.Int64N(100), math.MaxInt64 - r.Int64N(100)}[r.IntN(4)]
			s.st.open[i] = []int64{0, r.Int64N(8), -1, math.MaxInt64}[r.IntN(4)]
			s.st.weighted[i] = []float64{float64(r.IntN(total + 1)), r.Float64() * float64(total), -1, math.NaN()}[r.IntN(4)]
		}
		tl := tokenLoadScorer{queueThreshold: []int64{0, 1 << 16, 1 << 22}[r.IntN(3)], openRequestTokens: []int64{0, 256, math.MaxInt64 / 2}[r.IntN(3)]}
		w := []float64{0, 1, 0.3}[r.IntN(3)]
		var kept []int
		for i := range n {
			if r.IntN(3) != 0 {
				kept = append(kept, i)
			}
		}
		tl.scoreKept(s, kept, w)
		for _, i := range kept {
			want := w * clamp01(tl.Score(s, i))
			require.Equal(t, math.Float64bits(want), math.Float64bits(s.st.scores[i]), "candidate %d: %+v open %d weighted %v", i, s.st.cands[i], s.st.open[i], s.st.weighted[i])
		}
	}
}
