package kvroute

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/render"
)

// stairRouter is a router over n endpoints whose endpoint i holds the first
// 1+i blocks of a tokens-long prompt (the last holds all of it, confirmed),
// and that prompt.
func stairRouter(t *testing.T, n, tokens int) (*Router, []Endpoint, []uint32) {
	t.Helper()
	r := testRouter(t, nil, Options{})
	eps := endpoints(n)
	p := prompt(9, tokens)
	bs := r.Index().BlockSize()
	for i, e := range eps {
		nb := tokens / bs
		held := 1 + i*(nb-1)/n // below nb: only the last holds it all
		if i == n-1 {
			held = nb
		}
		engineStores(t, r.Index(), e.ID, p[:held*bs], uint64(i+1)*1_000_000)
	}
	return r, eps, p
}

// TestPickAllocatesNothingWhenReleased holds Pick to zero allocations for
// 2,048 tokens among 64 endpoints when the host releases each Decision:
// the Selection's scratch, the candidates' load counters and the Decision
// itself are all reused.
func TestPickAllocatesNothingWhenReleased(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's sync.Pool drops items at random: allocation counts vary")
	}
	r, eps, p := stairRouter(t, 64, 2048)
	req := &Request{Prompts: []render.Prompt{{TokenIDs: p}}}
	ctx := context.Background()
	want := eps[len(eps)-1].ID
	allocs := testing.AllocsPerRun(200, func() {
		d, err := r.Pick(ctx, req, eps)
		if err != nil {
			t.Fatal(err)
		}
		if d.Endpoint.ID != want || d.CachedTokens != len(p) {
			t.Fatalf("picked %s with %d cached tokens", d.Endpoint.ID, d.CachedTokens)
		}
		d.FirstChunk()
		d.Done(DoneInfo{})
		d.Release()
	})
	require.Zero(t, allocs)
}

// TestReleaseReusesTheDecision: a released Decision comes back, cleared,
// from the next Pick.
func TestReleaseReusesTheDecision(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's sync.Pool drops items at random")
	}
	r, eps, p := stairRouter(t, 8, 256)
	d := pick(t, r, p, eps)
	d.Done(DoneInfo{})
	d.Release()
	again := pick(t, r, p, eps[:4])
	require.Same(t, d, again)
	require.Equal(t, eps[3].ID, again.Endpoint.ID)
	require.False(t, again.first.Load())
	require.False(t, again.ended.Load())
	_, reqs, _ := r.Load().Load(eps[3].ID)
	require.Equal(t, int64(1), reqs, "the reused Decision carries its own request")
	again.Done(DoneInfo{})
	_, reqs, _ = r.Load().Load(eps[3].ID)
	require.Zero(t, reqs)
}

// TestReleaseEndsTheRequest: releasing a Decision whose Done never came
// ends it (its load released); a second Release, and Release on nil, do
// nothing, and the pool never hands one Decision to two picks.
func TestReleaseEndsTheRequest(t *testing.T) {
	r, eps, p := stairRouter(t, 8, 256)
	d := pick(t, r, p, eps)
	_, reqs, _ := r.Load().Load(d.Endpoint.ID)
	require.Equal(t, int64(1), reqs)
	d.Release()
	tok, reqs, _ := r.Load().Load(eps[7].ID)
	require.Zero(t, tok)
	require.Zero(t, reqs)
	d.Release()
	(*Decision)(nil).Release()
	a, b := pick(t, r, p, eps), pick(t, r, p, eps)
	require.NotSame(t, a, b)
	a.Release()
	b.Release()
}

// TestReleaseOfAFiledDecisionOnlyEndsIt: a Decision filed under a
// Request.ID is ended and unfiled by Release but not reused, since the
// request table or a host holding the ID may still reach it.
func TestReleaseOfAFiledDecisionOnlyEndsIt(t *testing.T) {
	r, eps, p := stairRouter(t, 8, 256)
	req := &Request{ID: "req-1", Prompts: []render.Prompt{{TokenIDs: p}}}
	d, err := r.Pick(context.Background(), req, eps)
	require.NoError(t, err)
	require.Same(t, d, r.Decision("req-1"))
	d.Release()
	require.Nil(t, r.Decision("req-1"))
	require.Zero(t, r.Requests().Len())
	require.Equal(t, eps[7], d.Endpoint, "not cleared: not reused")
	for range 4 {
		other := pick(t, r, p, eps)
		require.NotSame(t, d, other)
		other.Release()
	}
}
