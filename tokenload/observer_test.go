package tokenload

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// The observer sees every change of the local load, once, in the order the
// counters moved, and costs the request path no allocation.
func TestObserverSeesEveryLocalChange(t *testing.T) {
	tr, err := NewTracker(Options{})
	require.NoError(t, err)
	type change struct {
		ep       string
		tok, req int64
	}
	var got []change
	tr.SetObserver(func(ep string, tok, req int64) { got = append(got, change{ep, tok, req}) })
	h := tr.Dispatch("e:1", 300)
	h.FirstChunk()
	h.FirstChunk()
	h.Done()
	h.Done()
	h2 := tr.Dispatch("e:2", 50)
	h2.Done() // cancelled before its first chunk
	require.Equal(t, []change{{"e:1", 300, 1}, {"e:1", -300, 0}, {"e:1", 0, -1}, {"e:2", 50, 1}, {"e:2", -50, -1}}, got)

	tr.SetObserver(nil)
	tr.Dispatch("e:1", 1).Done()
	require.Len(t, got, 5, "removed")

	var n int64
	tr.SetObserver(func(_ string, tok, _ int64) { n += tok })
	var hh Inflight
	require.Zero(t, testing.AllocsPerRun(100, func() {
		tr.DispatchInto(&hh, "e:1", 10)
		hh.FirstChunk()
		hh.Done()
	}))
	require.Zero(t, n)
}

// The peers' changes add on top of SetPeerLoads until the next one; a
// release seen before its dispatch never makes Load negative.
func TestAddPeerLoad(t *testing.T) {
	tr, err := NewTracker(Options{})
	require.NoError(t, err)
	tr.SetPeerLoads(map[string]PeerLoad{"e:1": {Tokens: 100, Requests: 1}})
	tr.AddPeerLoad("e:1", 40, 1)
	tok, req, _ := tr.Load("e:1")
	require.Equal(t, [2]int64{140, 2}, [2]int64{tok, req})
	tr.AddPeerLoad("e:2", -40, -1)
	tok, req, _ = tr.Load("e:2")
	require.Equal(t, [2]int64{0, 0}, [2]int64{tok, req}, "never below zero")
	require.Equal(t, PeerLoad{}, tr.PeerLoadOf("e:2"))
	tr.SetPeerLoads(nil)
	tok, _, _ = tr.Load("e:1")
	require.Zero(t, tok, "SetPeerLoads replaces the changes")
}

// A peer's changes are accepted up to ±2⁶² each (package cluster's wire
// bound): their sum, and the sum with the local load, saturate rather than
// wrap, which would turn the most loaded endpoint into an idle one.
func TestPeerLoadSaturates(t *testing.T) {
	tr, err := NewTracker(Options{})
	require.NoError(t, err)
	tr.Dispatch("e:1", 10)
	tr.AddPeerLoad("e:1", 1<<62, 1<<62)
	tr.AddPeerLoad("e:1", 1<<62, 1<<62)
	tok, req, _ := tr.Load("e:1")
	require.Equal(t, [2]int64{math.MaxInt64, math.MaxInt64}, [2]int64{tok, req}, "Load")
	require.Equal(t, PeerLoad{Tokens: math.MaxInt64, Requests: math.MaxInt64}, tr.PeerLoadOf("e:1"))
	var v LoadView
	tokens, requests := make([]int64, 1), make([]int64, 1)
	tr.LoadAll(&v, []string{"e:1"}, tokens, requests)
	require.Equal(t, [2]int64{math.MaxInt64, math.MaxInt64}, [2]int64{tokens[0], requests[0]}, "LoadAll")

	tr.SetPeerLoads(map[string]PeerLoad{"e:1": {Tokens: math.MaxInt64, Requests: math.MaxInt64}})
	tok, req, _ = tr.Load("e:1")
	require.Equal(t, [2]int64{math.MaxInt64, math.MaxInt64}, [2]int64{tok, req}, "local + a saturated peer share")

	tr.AddPeerLoad("e:2", -(1 << 62), 0)
	tr.AddPeerLoad("e:2", -(1 << 62), 0)
	tr.AddPeerLoad("e:2", -(1 << 62), 0)
	tok, _, _ = tr.Load("e:2")
	require.Zero(t, tok, "releases saturate too, never wrapping to a large load")

	sum := PeerLoad{Tokens: 1 << 62, Requests: -(1 << 62)}.Add(1<<62, -(1<<62)).Add(1<<62, -(1 << 62))
	require.Equal(t, PeerLoad{Tokens: math.MaxInt64, Requests: math.MinInt64}, sum, "PeerLoad.Add")
	require.Equal(t, PeerLoad{Tokens: 5, Requests: -1}, PeerLoad{Tokens: 7, Requests: 1}.Add(-2, -2))
}
