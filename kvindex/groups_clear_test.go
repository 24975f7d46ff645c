package kvindex

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// A group store racing a Clear of its endpoint leaves no groups behind it:
// StoreGroup resolved its hashes under the endpoint's lock and recorded
// them after releasing it, so a Clear that ran in between (its groups
// first, then its blocks) was followed by a new group set for the cleared
// endpoint, which the endpoint, stored again from its restarted engine,
// found holding the old windows and states (a match longer than the engine
// can reuse), charged to no registered endpoint and out of memory
// eviction's reach.
func TestStoreGroupRacingClearLeavesNoGroups(t *testing.T) {
	ix := newTestIndex(t, Config{})
	prompt := seq(1, 4*testBS)
	for round := 0; round < 20000; round++ {
		require.NoError(t, ix.Store("a", storeEv("m", 100, prompt)))
		var wg sync.WaitGroup
		wg.Add(2)
		go func() {
			defer wg.Done()
			_, _ = ix.StoreGroup("a", &GroupStore{Group: 1, Kind: GroupMamba, Hashes: groupHashes(100, 4)})
		}()
		go func() {
			defer wg.Done()
			ix.Clear("a")
		}()
		wg.Wait()
		if _, ok := ix.eps.Load("a"); ok {
			ix.Clear("a") // the store came after the Clear: clear it too
		}
		_, ok := ix.hybrid.Load("a")
		require.False(t, ok, "round %d: groups of a cleared endpoint", round)
		require.Equal(t, int64(0), ix.Stats().Bytes, "round %d", round)
	}
}
