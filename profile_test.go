package kvroute

import (
	"context"
	"testing"

	"github.com/kvroute/kvroute/render"
	"github.com/kvroute/kvroute/tokenload"
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

// twoRoles picks the request with its ID on eps[0] and a copy without ID
// on eps[1], then appends the second to the first's Roles, as the Profile
// documentation says. between, when set, runs after both commits and
// before the append: what other goroutines may do meanwhile.
type twoRoles struct{ between func() }

func (p *twoRoles) Pick(ctx context.Context, req *Request, eps []Endpoint, st Picker) (*Decision, error) {
	d, err := st.Pick(ctx, req, eps[:1])
	if err != nil || req.ID != "a" {
		return d, err
	}
	preq := *req
	preq.ID = ""
	pd, err := st.Pick(ctx, &preq, eps[1:2])
	if err != nil {
		d.Done(DoneInfo{Err: err})
		return nil, err
	}
	if p.between != nil {
		p.between()
	}
	d.Roles = append(d.Roles, pd)
	return d, nil
}

func requireNoLoad(t *testing.T, r *Router, eps []Endpoint) {
	t.Helper()
	for _, e := range eps {
		tok, n, _ := r.Load().Load(e.ID)
		require.Zero(t, tok, e.ID)
		require.Zero(t, n, "open requests on %s after every request ended", e.ID)
	}
}

func rolesRequest(id string) *Request {
	return &Request{ID: id, Prompts: []render.Prompt{{TokenIDs: prompt(len(id), 320)}}}
}

// The request table drops a request (evicted at MaxRequests by another
// request's Commit) while the Profile is still adding its roles: the drop
// waits for Pick to return the Decision, then ends every role, the one
// added after the drop included.
func TestTableDropDuringProfileEndsEveryRole(t *testing.T) {
	prof := &twoRoles{}
	r := testRouter(t, func(c *Config) {
		c.Speculative.Enabled = new(false)
		c.Requests = tokenload.RequestTableConfig{MaxRequests: 1}
	}, Options{Profile: prof})
	eps := endpoints(2)
	var other *Decision
	prof.between = func() {
		var err error
		other, err = r.Pick(context.Background(), rolesRequest("b"), eps) // evicts "a": the table is full
		require.NoError(t, err)
		tok, _, _ := r.Load().Load(eps[1].ID)
		require.EqualValues(t, 320, tok, "the drop waits for Pick to return \"a\"")
	}
	d, err := r.Pick(context.Background(), rolesRequest("a"), eps)
	require.NoError(t, err)
	require.Len(t, d.Roles, 1)
	tok, n, _ := r.Load().Load(eps[1].ID)
	require.Zero(t, tok+n, "dropped: its added role ended when Pick returned it")
	require.Nil(t, r.Decision("a"))
	d.FirstChunk()
	d.Done(DoneInfo{})
	other.Done(DoneInfo{})
	requireNoLoad(t, r, eps)
}

// A host that has only the request's ID does not find a Decision whose
// Profile is still adding roles (so its Done cannot end it before the
// roles are set); it finds it once Pick returned it, and its Done then ends
// every role. A FirstChunk or Done through the request table meanwhile is
// applied to every role when Pick returns.
func TestRouterDecisionWaitsForTheProfile(t *testing.T) {
	prof := &twoRoles{}
	r := testRouter(t, func(c *Config) { c.Speculative.Enabled = new(false) }, Options{Profile: prof})
	eps := endpoints(2)
	prof.between = func() {
		require.Nil(t, r.Decision("a"), "not yet returned by Pick")
		r.Decision("a").Done(DoneInfo{}) // a nil Decision: nothing
	}
	d, err := r.Pick(context.Background(), rolesRequest("a"), eps)
	require.NoError(t, err)
	require.Same(t, d, r.Decision("a"))
	r.Decision("a").Done(DoneInfo{})
	requireNoLoad(t, r, eps)
	d.Done(DoneInfo{}) // the host's deferred safety net: nothing more
	requireNoLoad(t, r, eps)

	prof.between = func() {
		require.True(t, r.Requests().FirstChunk("a"))
		tok, _, _ := r.Load().Load(eps[0].ID)
		require.EqualValues(t, 320, tok, "applied when Pick returns")
	}
	d, err = r.Pick(context.Background(), rolesRequest("a"), eps)
	require.NoError(t, err)
	for _, e := range eps {
		tok, n, _ := r.Load().Load(e.ID)
		require.Zero(t, tok, "%s: the first chunk released every role's prompt tokens", e.ID)
		require.EqualValues(t, 1, n, e.ID)
	}
	d.Done(DoneInfo{})
	requireNoLoad(t, r, eps)

	prof.between = func() { require.True(t, r.Requests().Done("a")) }
	d, err = r.Pick(context.Background(), rolesRequest("a"), eps)
	require.NoError(t, err)
	require.Nil(t, r.Decision("a"), "ended through the table while Pick ran")
	requireNoLoad(t, r, eps)
	d.Done(DoneInfo{})
}

// The request ended by ID from another goroutine while the Profile appends
// its roles: whichever comes first, that Done alone releases every role,
// and the race detector sees no access to Roles from the other goroutine.
func TestEndByIDRacingProfileReleasesEveryRole(t *testing.T) {
	prof := &twoRoles{}
	r := testRouter(t, func(c *Config) { c.Speculative.Enabled = new(false) }, Options{Profile: prof})
	eps := endpoints(2)
	for range 100 {
		ended := make(chan struct{})
		prof.between = func() {
			go func() {
				defer close(ended)
				r.Requests().Done("a") // the table's copy of the host's abort
			}()
		}
		d, err := r.Pick(context.Background(), rolesRequest("a"), eps)
		require.NoError(t, err)
		<-ended
		requireNoLoad(t, r, eps) // ended by the table's Done alone
		d.Done(DoneInfo{})
	}
}
