package tokenload

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
)

func TestCountersOneCacheLine(t *testing.T) {
	require.Equal(t, uintptr(64), unsafe.Sizeof(counters{}))
}

func TestPeerLoadAddsToLoad(t *testing.T) {
	tr, err := NewTracker(Options{})
	require.NoError(t, err)
	h := tr.Dispatch("a", 100)
	tr.SetPeerLoads(map[string]PeerLoad{"a": {Tokens: 50, Requests: 2}, "b": {Tokens: 7, Requests: 1}, "c": {}})

	tok, req, ok := tr.Load("a")
	require.True(t, ok)
	require.Equal(t, [2]int64{150, 3}, [2]int64{tok, req}, "local + peers")
	tok, req, ok = tr.Load("b")
	require.True(t, ok, "an endpoint only peers dispatched to has counters")
	require.Equal(t, [2]int64{7, 1}, [2]int64{tok, req})
	_, _, ok = tr.Load("c")
	require.False(t, ok, "zero peer load creates nothing")
	lt, lr := tr.LocalLoad("a")
	require.Equal(t, [2]int64{100, 1}, [2]int64{lt, lr})
	require.Equal(t, PeerLoad{Tokens: 50, Requests: 2}, tr.PeerLoadOf("a"))

	var seen int64
	tr.Range(func(ep string, tokens, _ int64) bool { seen += tokens; return true })
	require.Equal(t, int64(100), seen, "Range reports local load only (what a replica publishes)")

	tr.SetPeerLoads(map[string]PeerLoad{"b": {Tokens: -5, Requests: 4}})
	tok, req, _ = tr.Load("a")
	require.Equal(t, [2]int64{100, 1}, [2]int64{tok, req}, "absent endpoint loses its peer load")
	tok, req, _ = tr.Load("b")
	require.Equal(t, [2]int64{0, 4}, [2]int64{tok, req}, "negative clamps to 0")

	h.Done()
	tr.SetPeerLoads(nil)
	tok, req, _ = tr.Load("a")
	require.Equal(t, [2]int64{0, 0}, [2]int64{tok, req})
	tok, req, _ = tr.Load("b")
	require.Equal(t, [2]int64{0, 0}, [2]int64{tok, req}, "nil clears every peer load")
}

func TestLoadWithPeersDoesNotAllocate(t *testing.T) {
	tr, err := NewTracker(Options{})
	require.NoError(t, err)
	tr.SetPeerLoads(map[string]PeerLoad{"a": {Tokens: 1}})
	require.Zero(t, testing.AllocsPerRun(100, func() { _, _, _ = tr.Load("a") }))
}
