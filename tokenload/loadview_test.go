package tokenload

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestLoadAllIsLoad holds LoadAll to Load through the changes that must
// make a view resolve again: an endpoint's first dispatch, its removal and
// re-creation, peer load, another candidate list, and the same IDs in new
// strings.
func TestLoadAllIsLoad(t *testing.T) {
	tr := newTracker(t)
	ids := []string{"a:1", "b:1", "c:1", "a:1"}
	tokens, requests := make([]int64, len(ids)), make([]int64, len(ids))
	var v LoadView
	check := func(ids []string) {
		t.Helper()
		tr.LoadAll(&v, ids, tokens, requests)
		for i, id := range ids {
			tok, req, _ := tr.Load(id)
			require.Equal(t, tok, tokens[i], "tokens of %s", id)
			require.Equal(t, req, requests[i], "requests of %s", id)
		}
	}
	check(ids) // nothing dispatched: all zero
	h := tr.Dispatch("b:1", 100)
	check(ids) // b's counters were created after the view resolved
	tr.Dispatch("a:1", 7)
	check(ids)
	check(ids) // from the cached resolution
	tr.Remove("b:1")
	check(ids) // b's old counters are not read any more
	tr.Dispatch("b:1", 5)
	check(ids) // nor are they after it came back
	h.Done()
	tr.SetPeerLoads(map[string]PeerLoad{"c:1": {Tokens: 40, Requests: 2}})
	check(ids)
	check([]string{"c:1", "b:1"})
	fresh := make([]string, len(ids)) // equal IDs in other strings
	for i, id := range ids {
		fresh[i] = strings.Clone(id)
	}
	check(fresh)
	check([]string{"d:1", "a:1", "b:1", "c:1"})
	require.Equal(t, int64(7), tokens[1])
	require.Equal(t, int64(40), tokens[3])
}

// TestLoadAllAllocatesNothing checks the request path's read of every
// candidate's load: once the view has grown, nothing is allocated.
func TestLoadAllAllocatesNothing(t *testing.T) {
	tr := newTracker(t)
	ids := []string{"a:1", "b:1", "c:1"}
	for _, id := range ids {
		tr.Dispatch(id, 1)
	}
	tokens, requests := make([]int64, len(ids)), make([]int64, len(ids))
	var v LoadView
	tr.LoadAll(&v, ids, tokens, requests)
	require.Zero(t, testing.AllocsPerRun(100, func() { tr.LoadAll(&v, ids, tokens, requests) }))
}
