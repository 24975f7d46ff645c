package tokenload

import (
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
