package kvroute

import (
	"context"
	"testing"

	"github.com/kvroute/kvroute/render"
	"github.com/stretchr/testify/require"
)

// prefillDecode picks a decode endpoint among those labelled role=decode
// and a prefill endpoint among those labelled role=prefill.
type prefillDecode struct{}

func (prefillDecode) Pick(ctx context.Context, req *Request, eps []Endpoint, stages Picker) (*Decision, error) {
	var decode, prefill []Endpoint
	for _, e := range eps {
		if e.Labels["role"] == "prefill" {
			prefill = append(prefill, e)
		} else {
			decode = append(decode, e)
		}
	}
	d, err := stages.Pick(ctx, req, decode)
	if err != nil {
		return nil, err
	}
	r2 := *req
	r2.ID = "" // the ID is the decode pick's
	p, err := stages.Pick(ctx, &r2, prefill)
	if err != nil {
		d.Done(DoneInfo{Err: err})
		return nil, err
	}
	d.Roles = append(d.Roles, p)
	return d, nil
}

// A Profile picks one request in two roles through the same stages; the
// gateway sees one Decision, whose FirstChunk and Done release both picks,
// and so does the request table when it ends a dropped request.
func TestProfilePicksInTwoRoles(t *testing.T) {
	r := testRouter(t, nil, Options{Profile: prefillDecode{}})
	eps := endpoints(4)
	for i := range eps {
		role := "decode"
		if i%2 == 1 {
			role = "prefill"
		}
		eps[i].Labels = map[string]string{"role": role}
	}
	p := prompt(5, 64*4)
	engineStores(t, r.Index(), eps[2].ID, p, 1)
	engineStores(t, r.Index(), eps[3].ID, p, 100)

	d, err := r.Pick(context.Background(), &Request{ID: "r1", Prompts: []render.Prompt{{TokenIDs: append(p, prompt(6, 100)...)}}}, eps)
	require.NoError(t, err)
	require.Equal(t, eps[2].ID, d.Endpoint.ID)
	require.Len(t, d.Roles, 1)
	require.Equal(t, eps[3].ID, d.Roles[0].Endpoint.ID)
	for _, e := range []string{eps[2].ID, eps[3].ID} {
		tok, reqs, _ := r.load.Load(e)
		require.Equal(t, [2]int64{100, 1}, [2]int64{tok, reqs}, e)
	}
	d.FirstChunk()
	tok, reqs, _ := r.load.Load(eps[3].ID)
	require.Equal(t, [2]int64{0, 1}, [2]int64{tok, reqs})
	d.Done(DoneInfo{})
	for _, e := range eps {
		tok, reqs, _ := r.load.Load(e.ID)
		require.Zero(t, tok+reqs, e.ID)
	}
	require.Nil(t, r.Decision("r1"), "ended by its Decision")

	// Found by ID, the Decision ends both roles too.
	d, err = r.Pick(context.Background(), &Request{ID: "r2", Prompts: []render.Prompt{{TokenIDs: p}}}, eps)
	require.NoError(t, err)
	require.Same(t, d, r.Decision("r2"))
	r.Decision("r2").Done(DoneInfo{})
	for _, e := range eps {
		tok, reqs, _ := r.load.Load(e.ID)
		require.Zero(t, tok+reqs, e.ID)
	}
}

// A decode pick with RemotePrefill is charged an open request and no
// prompt tokens; a prefill pick with PrefillOnly ends whole at the first
// chunk; both take speculative entries.
func TestRemotePrefillAndPrefillOnlyAccounting(t *testing.T) {
	r := testRouter(t, nil, Options{})
	eps := endpoints(2)
	p := prompt(7, 64*4)
	d, err := r.Pick(context.Background(), &Request{Prompts: []render.Prompt{{TokenIDs: p}}, RemotePrefill: true}, eps[:1])
	require.NoError(t, err)
	require.Zero(t, d.UncachedTokens)
	tok, reqs, _ := r.load.Load(eps[0].ID)
	require.Equal(t, [2]int64{0, 1}, [2]int64{tok, reqs})
	pd, err := r.Pick(context.Background(), &Request{Prompts: []render.Prompt{{TokenIDs: p}}, PrefillOnly: true}, eps[1:])
	require.NoError(t, err)
	tok, reqs, _ = r.load.Load(eps[1].ID)
	require.Equal(t, [2]int64{256, 1}, [2]int64{tok, reqs})
	pd.FirstChunk()
	tok, reqs, _ = r.load.Load(eps[1].ID)
	require.Equal(t, [2]int64{0, 0}, [2]int64{tok, reqs}, "the prefill part ends at its one token")
	pd.Done(DoneInfo{})
	d.FirstChunk()
	tok, reqs, _ = r.load.Load(eps[0].ID)
	require.Equal(t, [2]int64{0, 1}, [2]int64{tok, reqs}, "the decode part stays open")
	d.Done(DoneInfo{})
	for _, e := range eps {
		tok, reqs, _ = r.load.Load(e.ID)
		require.Zero(t, tok+reqs)
	}
	// Both hold the prompt speculatively: a third pick sees them warm.
	s, err := r.Match(context.Background(), &Request{Prompts: []render.Prompt{{TokenIDs: p}}}, eps)
	require.NoError(t, err)
	defer s.Release()
	require.Equal(t, 4, s.Candidate(0).Match.Blocks)
	require.Equal(t, 4, s.Candidate(1).Match.Blocks)
}
