package disagg

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/render"
)

// A client's max_tokens is charged at most DecodeQueueOutputTokens: more
// would weigh no more in the decode pick, and one near the int64 limit
// wrapped the endpoint's in-flight output tokens negative once a second
// request landed there, so the busiest decode endpoint scored as idle.
func TestOutputChargeIsAtMostTheDecodeQueue(t *testing.T) {
	f := newFleet(t, Config{}, Options{}, RoleDecode)
	pick := func(body string) {
		d, err := f.r.Pick(context.Background(), &kvroute.Request{Body: []byte(body),
			Prompts: []render.Prompt{{TokenIDs: prompt(1, 64)}}}, f.eps)
		require.NoError(t, err)
		t.Cleanup(func() { d.Done(kvroute.DoneInfo{}) })
	}
	pick(`{"max_tokens":9223372036854775807}`)
	pick(`{"max_tokens":16}`)
	tok, reqs := f.p.DecodeLoad(f.eps[0].ID)
	require.EqualValues(t, 2, reqs)
	require.EqualValues(t, DefaultDecodeQueueOutputTokens+16, tok)

	// A byte order mark before the body hides nothing (vLLM reads past it).
	pick("\xef\xbb\xbf" + `{"max_tokens":7}`)
	tok, reqs = f.p.DecodeLoad(f.eps[0].ID)
	require.EqualValues(t, 3, reqs)
	require.EqualValues(t, DefaultDecodeQueueOutputTokens+16+7, tok)
}

// The Profile's candidates are one pick's, which the Router narrows to the
// request's model: in a pool serving two models, the other model's decode
// endpoints are missing from them while their requests run. Pruning keeps
// the counters of endpoints with requests in flight (a request for the
// small model used to drop the big model's decode load, so its endpoints
// looked idle), and drops them once those requests have ended.
func TestPruneKeepsTheDecodeLoadOfOtherModels(t *testing.T) {
	p, err := New(Config{}, Options{})
	require.NoError(t, err)
	t.Cleanup(p.Close)
	rc := kvroute.DefaultConfig()
	rc.Model = "a"
	rc.Events.Enabled = new(false)
	rc.DisableRender = true
	r, err := kvroute.New(context.Background(), rc, kvroute.Options{Profile: p})
	require.NoError(t, err)
	t.Cleanup(r.Close)

	eps := []kvroute.Endpoint{{ID: "10.0.1.1:8000", Models: []string{"a"}}}
	var bs []string
	for i := range 20 {
		id := fmt.Sprintf("10.0.2.%d:8000", i+1)
		bs = append(bs, id)
		eps = append(eps, kvroute.Endpoint{ID: id, Models: []string{"b"}})
	}
	loadB := func() (sum int64) {
		for _, id := range bs {
			tok, _ := p.DecodeLoad(id)
			sum += tok
		}
		return sum
	}
	pickA := func() {
		d, err := r.Pick(context.Background(), &kvroute.Request{Model: "a", Prompts: []render.Prompt{{TokenIDs: prompt(99, 64)}}}, eps)
		require.NoError(t, err)
		d.Done(kvroute.DoneInfo{})
	}
	var open []*kvroute.Decision
	for i := range 20 {
		d, err := r.Pick(context.Background(), &kvroute.Request{Model: "b", Prompts: []render.Prompt{{TokenIDs: prompt(i+1, 64)}}}, eps)
		require.NoError(t, err)
		open = append(open, d)
	}
	require.EqualValues(t, 20*DefaultOutputTokens, loadB())

	pickA() // one candidate: the tracker's 21 counters are over the prune's line
	require.EqualValues(t, 20*DefaultOutputTokens, loadB(), "model b's open requests keep their decode load")
	require.Equal(t, 21, p.out.Len())

	for _, d := range open {
		d.Done(kvroute.DoneInfo{})
	}
	pickA() // 21 counters kept at the last prune: under the line, nothing to do
	require.Equal(t, 21, p.out.Len())
	p.pruneKept.Store(0)
	pickA() // idle now: the other model's counters go
	require.Equal(t, 1, p.out.Len())
}

// The Profile names no fallback endpoints, even when the request asks for
// them: the decode load it charges stays on its decode pick (a gateway's
// Decision.Served would move the router's accounting only), and a split
// request's prefill was picked for that decoder. A gateway gets the pick
// alone, as the package documentation says.
func TestProfileNamesNoFallbacks(t *testing.T) {
	f := newFleet(t, Config{}, Options{}, RoleDecode, RoleDecode, RoleDecode)
	d, err := f.r.Pick(context.Background(), &kvroute.Request{Fallbacks: 2,
		Prompts: []render.Prompt{{TokenIDs: prompt(1, 64)}}}, f.eps)
	require.NoError(t, err)
	defer d.Done(kvroute.DoneInfo{})
	require.Empty(t, d.Fallbacks)
}
