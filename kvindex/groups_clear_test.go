package kvindex

import (
	"runtime"
	"sync"
	"sync/atomic"
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

// matchesDuringClear builds an endpoint's state with build, then clears
// it, round after round, while readers match its prompt and count the
// matches longer than limit among those that ran between a build's end and
// its Clear's return (the endpoint never holds a longer usable prefix
// then). It returns those and how many such matches ran.
func matchesDuringClear(t *testing.T, ix *Index, prompt []uint32, rounds, limit int, build func()) (wrong, checked int64) {
	t.Helper()
	keys := Keys(nil, prompt, testBS, &KeyParams{Model: "m"})
	var phase, bad, looked atomic.Int64 // phase: odd while a round's state is built and not yet cleared
	var stop atomic.Bool
	var wg sync.WaitGroup
	for r := 0; r < 2; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var out MatchResult
			for !stop.Load() {
				p := phase.Load()
				ix.Match(keys, []string{"a"}, &out)
				if p%2 == 1 && phase.Load() == p {
					looked.Add(1)
					if out.Blocks(0) > limit {
						bad.Add(1)
					}
				}
				runtime.Gosched() // the writer's turn, on a machine of few cores
			}
		}()
	}
	for round := 0; round < rounds; round++ {
		build()
		phase.Add(1)
		// Let the readers match this state, however busy the machine.
		for at := looked.Load(); looked.Load() < at+1 && !t.Failed(); {
			runtime.Gosched()
		}
		ix.Clear("a")
		phase.Add(1)
	}
	stop.Store(true)
	wg.Wait()
	return bad.Load(), looked.Load()
}

// A Match racing a Clear of an endpoint with non-prefix cache groups never
// reports it holding more than its groups allow: Clear forgot the groups
// before removing the blocks, so a Match that read the groups in between
// (none, or the emptied set) credited every contiguous full-attention
// block the walk had seen, a prefix the engine could not reuse.
func TestMatchRacingClearKeepsGroupLimits(t *testing.T) {
	ix := newTestIndex(t, Config{})
	prompt := seq(1, 8*testBS)
	// Blocks of another prompt stored first, which Clear removes first,
	// leave the walk time to see the prompt's.
	other := seq(1_000_000, 200*testBS)
	wrong, checked := matchesDuringClear(t, ix, prompt, 60, 1, func() {
		require.NoError(t, ix.Store("a", storeEv("m", 1000, other)))
		require.NoError(t, ix.Store("a", storeEv("m", 100, prompt)))
		_, err := ix.StoreGroup("a", &GroupStore{Group: 1, Kind: GroupMamba, Hashes: []uint64{100}})
		require.NoError(t, err)
	})
	require.Zero(t, wrong, "matches longer than the groups allow, of %d", checked)
}
