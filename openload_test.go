package kvroute

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/affinity"
)

// TestPickCountsOpenRequests: two endpoints with no committed prefill
// tokens, the first still streaming three answers. With the default
// OpenRequestTokens the idle one wins; with 0 (the former behaviour) they
// tie and the tie-break (a source that keeps the first) picks the busy one.
func TestPickCountsOpenRequests(t *testing.T) {
	for _, tc := range []struct {
		name    string
		perOpen int64
		want    int
	}{{"default", DefaultConfig().OpenRequestTokens, 1}, {"disabled", 0, 0}} {
		t.Run(tc.name, func(t *testing.T) {
			r := testRouter(t, func(c *Config) { c.OpenRequestTokens = tc.perOpen }, Options{Random: seqRandom(0.99)})
			eps := endpoints(2)
			require.NoError(t, r.SetEndpoints(eps))
			for i := 0; i < 3; i++ { // three requests streaming on eps[0]
				h := r.Load().Dispatch(eps[0].ID, 4096)
				h.FirstChunk()
			}
			tok, open, _ := r.Load().Load(eps[0].ID)
			require.Zero(t, tok)
			require.Equal(t, int64(3), open)
			req := &Request{Prompts: []Prompt{{TokenIDs: prompt(7, 1000)}}}
			d, err := r.Pick(context.Background(), req, eps)
			require.NoError(t, err)
			defer d.Done(nil)
			require.Equal(t, eps[tc.want].ID, d.Endpoint.ID)
			require.Equal(t, affinity.OutcomeNoMatch, d.Outcome)
		})
	}
}

func TestConfigRejectsNegativeOpenRequestTokens(t *testing.T) {
	cfg := DefaultConfig()
	cfg.OpenRequestTokens = -1
	require.ErrorIs(t, cfg.Validate(), ErrInvalidConfig)
	require.Equal(t, int64(1024), DefaultConfig().OpenRequestTokens)
}
