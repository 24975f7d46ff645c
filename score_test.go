package kvroute

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/affinity"
	"github.com/kvroute/kvroute/render"
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
