package kvroute

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/kvindex"
	"github.com/kvroute/kvroute/render"
)

// storeUnder is engineStores under another model than testModel.
func storeUnder(t *testing.T, ix *kvindex.Index, endpoint, model string, tokens []uint32, hashBase uint64) {
	t.Helper()
	bs := ix.BlockSize()
	n := len(tokens) / bs
	hashes := make([]uint64, n)
	for i := range hashes {
		hashes[i] = hashBase + uint64(i)
	}
	require.NoError(t, ix.Store(endpoint, &kvindex.StoreEvent{
		EngineHashes: hashes, Tokens: tokens[:n*bs], BlockSize: bs, Model: model, Group: -1,
	}))
}

// twoModels is a fleet of two endpoints serving the router's model (one by
// default, one listing it), two serving "beta", and one serving both.
func twoModels() []Endpoint {
	eps := endpoints(5)
	eps[1].Models = []string{testModel}
	eps[2].Models = []string{"beta"}
	eps[3].Models = []string{"beta"}
	eps[4].Models = []string{testModel, "beta"}
	return eps
}

func TestPickRoutesEachModelOnlyToItsEndpoints(t *testing.T) {
	r := testRouter(t, func(c *Config) { c.Speculative.Enabled = new(false) }, Options{})
	eps := twoModels()
	alpha := map[string]bool{eps[0].ID: true, eps[1].ID: true, eps[4].ID: true}
	beta := map[string]bool{eps[2].ID: true, eps[3].ID: true, eps[4].ID: true}
	for i := range 60 {
		p := []render.Prompt{{TokenIDs: prompt(100+i, 256)}}
		d, err := r.Pick(context.Background(), &Request{Model: "beta", Prompts: p}, eps)
		require.NoError(t, err)
		require.True(t, beta[d.Endpoint.ID], "beta went to %s", d.Endpoint.ID)
		d.Done(DoneInfo{})
		for _, m := range []string{"", testModel} {
			d, err = r.Pick(context.Background(), &Request{Model: m, Prompts: p}, eps)
			require.NoError(t, err)
			require.True(t, alpha[d.Endpoint.ID], "model %q went to %s", m, d.Endpoint.ID)
			d.Done(DoneInfo{})
		}
	}
	_, err := r.Pick(context.Background(), &Request{Model: "gamma", Prompts: []render.Prompt{{TokenIDs: prompt(1, 256)}}}, eps)
	require.ErrorIs(t, err, ErrModelMismatch, "a model no endpoint serves is refused, not routed cache-blind")
	require.ErrorContains(t, err, `"gamma"`)
	s, err := r.Match(context.Background(), &Request{Model: "beta", Prompts: []render.Prompt{{TokenIDs: prompt(1, 256)}}}, eps)
	require.NoError(t, err)
	require.Equal(t, 3, s.Len(), "Match narrows the candidates too")
	s.Release()
}

func TestPickMatchesEachModelsOwnCache(t *testing.T) {
	r := testRouter(t, func(c *Config) { c.Speculative.Enabled = new(false) }, Options{})
	eps := twoModels()
	shared := prompt(7, 1024)
	// The same tokens cached under beta on eps[3] and under the router's
	// model on eps[1]: each model's request finds its own copy.
	storeUnder(t, r.Index(), eps[3].ID, "beta", shared, 5000)
	storeUnder(t, r.Index(), eps[1].ID, testModel, shared, 9000)
	d, err := r.Pick(context.Background(), &Request{Model: "beta", Prompts: []render.Prompt{{TokenIDs: shared}}}, eps)
	require.NoError(t, err)
	require.Equal(t, eps[3].ID, d.Endpoint.ID)
	require.Equal(t, 1024, d.CachedTokens)
	d.Done(DoneInfo{})
	d = pick(t, r, shared, eps)
	require.Equal(t, eps[1].ID, d.Endpoint.ID)
	require.Equal(t, 1024, d.CachedTokens)
	d.Done(DoneInfo{})
}

func TestPickWithoutModelsListedKeepsTheOneModelRules(t *testing.T) {
	r := testRouter(t, nil, Options{})
	eps := endpoints(3)
	p := []render.Prompt{{TokenIDs: prompt(1, 256)}}
	// Events off and no Models listed: another model name roots the keys
	// and routes among every endpoint, as before.
	d, err := r.Pick(context.Background(), &Request{Model: "other", Prompts: p}, eps)
	require.NoError(t, err)
	d.Done(DoneInfo{})
	got, err := r.forModel(&Request{Prompts: p}, eps)
	require.NoError(t, err)
	require.Same(t, &eps[0], &got[0], "the one-model path returns the caller's slice")
}

func TestEndpointEventModel(t *testing.T) {
	require.Equal(t, "base", (&Endpoint{}).eventModel("base"))
	require.Equal(t, "base", (&Endpoint{Models: []string{"x", "base"}}).eventModel("base"))
	require.Equal(t, "x", (&Endpoint{Models: []string{"x", "y"}}).eventModel("base"))
	require.True(t, (&Endpoint{}).serves("", "base"))
	require.False(t, (&Endpoint{Models: []string{"x"}}).serves("", "base"))
}
