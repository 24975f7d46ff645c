package kvindex

import (
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

// keyWithHash returns the key that hashKey maps to h under seed: the
// hash is a bijection (xor-shifts by 33 are their own inverse, and the odd
// multiplier has an inverse modulo 2^64), so tests can place keys in
// chosen shards and home slots.
func keyWithHash(h, seed uint64) Key {
	const mul = 0xff51afd7ed558ccd
	inv := uint64(mul) // Newton's iteration: each step doubles the correct low bits
	for i := 0; i < 6; i++ {
		inv *= 2 - mul*inv
	}
	x := h ^ h>>33
	x *= inv
	x ^= x >> 33
	return Key(x ^ seed)
}

// crowdKeys returns n keys of m that share a shard and every hash bit but
// the low 20, which differ by at most n: they share a home slot in any
// table of up to 2^16 slots (but with odds below 10^-6), so each insert
// moves the block in it.
func crowdKeys(m *blockMap, n int, rng *rand.Rand) []Key {
	base := rng.Uint64() &^ (1<<20 - 1)
	base += rng.Uint64N(1<<20 - uint64(n))
	keys := make([]Key, n)
	for i := range keys {
		keys[i] = keyWithHash(base+uint64(i), m.seed)
	}
	return keys
}

func TestKeyWithHashInvertsHashKey(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for i := 0; i < 1000; i++ {
		h, seed := rng.Uint64(), rng.Uint64()
		require.Equal(t, h, hashKey(keyWithHash(h, seed), seed))
	}
}

// homeOf returns key's home slot in its shard's current table and the slot
// it is in (-1 if absent).
func homeOf(m *blockMap, key Key) (home, at int) {
	sh, h := m.locate(key)
	tb := sh.tab.Load()
	at, _ = tb.find(key, h)
	return int(homeSlot(h, len(tb.slots))), at
}

// A new block takes its home slot, and the block there moves to the end of
// the cluster, where every earlier block is still found.
func TestBlockMapNewBlockTakesItsHomeSlot(t *testing.T) {
	m := newBlockMap(21)
	rng := rand.New(rand.NewPCG(2, 3))
	crowd := crowdKeys(m, 40, rng)
	spread := shardKeys(m, 200)
	for i, k := range crowd {
		m.Compute(k, func(blockVal, bool) (blockVal, bool) { return bmValue(k, 1+i%3), false })
		home, at := homeOf(m, k)
		require.Equal(t, home, at, "crowd key %d", i)
		for j, e := range crowd[:i+1] {
			v, ok := m.Load(e)
			require.True(t, ok, "crowd key %d after inserting %d", j, i)
			require.True(t, bmCheck(e, v))
		}
		// Blocks of other homes in between, so the cluster meets others.
		for _, e := range spread[5*i : 5*i+5] {
			m.Compute(e, func(blockVal, bool) (blockVal, bool) { return bmValue(e, 1), false })
		}
	}
	for _, e := range append(crowd, spread...) {
		v, ok := m.Load(e)
		require.True(t, ok)
		require.True(t, bmCheck(e, v))
	}
}

// Readers never miss a block while inserts move it: a writer inserts
// blocks of one home slot in turn (each insert moves the block there, the
// previous one, to the end of the cluster) and deletes them a few inserts
// later, through tombstones and rebuilds of the shard's table, while
// readers look up the blocks that are present, one by one and in batches.
// The writer publishes the window of present blocks [lo, hi): hi after an
// insert, lo before a delete, so a reader that misses block i and then
// reads lo ≤ i has missed a present block.
func TestBlockMapReadersNeverMissMovedBlocks(t *testing.T) {
	m := newBlockMap(23)
	const n, window = 20_000, 8
	keys := crowdKeys(m, n, rand.New(rand.NewPCG(4, 5)))
	var lo, hi atomic.Int64
	var stop atomic.Bool
	var missed, bad, looked atomic.Int64
	var wg sync.WaitGroup
	for r := 0; r < 2; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var vs [probeBatch]blockVal
			for !stop.Load() {
				l, h := lo.Load(), hi.Load()
				for i := l; i < h; i++ {
					looked.Add(1)
					if v, ok := m.Load(keys[i]); !ok {
						if lo.Load() <= i {
							missed.Add(1)
						}
					} else if !bmCheck(keys[i], v) {
						bad.Add(1)
					}
				}
				if w := min(h-l, probeBatch); w > 0 {
					got := int64(m.loadBatch(keys[h-w:h], &vs))
					if got < w && lo.Load() <= h-w+got {
						missed.Add(1)
					}
				}
			}
		}()
	}
	for i := 0; i < n; i++ {
		if i%200 == 0 && i > 0 {
			// Let the readers run in every stretch of the writer's work,
			// however busy the machine.
			for at := looked.Load(); looked.Load() < at+2*window; {
				runtime.Gosched()
			}
		}
		k := keys[i]
		m.Compute(k, func(blockVal, bool) (blockVal, bool) { return bmValue(k, 1+i%4), false })
		hi.Store(int64(i + 1))
		if i >= window {
			lo.Store(int64(i - window + 1))
			d := keys[i-window]
			m.Compute(d, func(blockVal, bool) (blockVal, bool) { return blockVal{}, true })
		}
	}
	stop.Store(true)
	wg.Wait()
	require.Zero(t, missed.Load(), "readers missed blocks that were present (of %d lookups)", looked.Load())
	require.Zero(t, bad.Load(), "readers saw inconsistent values")
}

// TestBlockMapReadersNeverMissUpdatedBlocks updates the values of present
// blocks in place, over and over, while readers look them up: a block whose
// value changed between a reader's two reads of its slot is still the
// block in that slot, and the reader must not probe past it (it then hit
// the empty slot ending the probe and reported the block absent, so that
// Sweep and Clear, which look a speculative block up before removing it,
// left the membership behind for good).
func TestBlockMapReadersNeverMissUpdatedBlocks(t *testing.T) {
	m := newBlockMap(29)
	// A crowd sharing a home slot, so that most are found by the probe
	// past it, and a few spread keys found in their home slot.
	keys := crowdKeys(m, 6, rand.New(rand.NewPCG(6, 7)))
	for i := uint64(1); i <= 4; i++ {
		keys = append(keys, Key(i*0x9E3779B97F4A7C15))
	}
	for _, k := range keys {
		m.Compute(k, func(blockVal, bool) (blockVal, bool) { return bmValue(k, 1), false })
	}
	var stop atomic.Bool
	var missed, bad, looked atomic.Int64
	var wg sync.WaitGroup
	for r := 0; r < 2; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var vs [probeBatch]blockVal
			for !stop.Load() {
				for _, k := range keys {
					looked.Add(1)
					if v, ok := m.Load(k); !ok {
						missed.Add(1)
					} else if !bmCheck(k, v) {
						bad.Add(1)
					}
				}
				if got := m.loadBatch(keys, &vs); got < len(keys) {
					missed.Add(1)
				}
			}
		}()
	}
	const updates = 50_000
	for i := 0; i < updates; i++ {
		if i%500 == 0 && i > 0 {
			// Let the readers run in every stretch of the writer's work,
			// however busy the machine.
			for at := looked.Load(); looked.Load() < at+int64(len(keys)); {
				runtime.Gosched()
			}
		}
		k := keys[i%len(keys)]
		m.Compute(k, func(blockVal, bool) (blockVal, bool) { return bmValue(k, 1+i%4), false })
	}
	stop.Store(true)
	wg.Wait()
	require.Zero(t, missed.Load(), "readers missed blocks that were present (of %d lookups)", looked.Load())
	require.Zero(t, bad.Load(), "readers saw inconsistent values")
}
