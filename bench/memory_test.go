package bench

import (
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/kvroute/kvroute/kvindex"
)

// memoryMemberships is the size of the Memory benchmark's index.
const memoryMemberships = 1 << 20

// heapInUse returns the live heap after a full collection.
func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// BenchmarkMemory measures the index's memory per (block, endpoint)
// membership, engine-hash maps included, in the worst case for memory:
// 2^20 distinct blocks, each held by exactly one of 64 endpoints, so nothing
// is shared between memberships. One op builds the whole index. Target ≤ 100
// bytes/membership.
func BenchmarkMemory(b *testing.B) {
	var perMembership, bytesPerBlock float64
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		before := heapInUse()
		b.StartTimer()
		ix, err := kvindex.New(kvindex.Config{SweepInterval: -1}, kvindex.Options{})
		if err != nil {
			b.Fatal(err)
		}
		n, err := Background(ix, EndpointIDs(64), memoryMemberships, 256, 3)
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		after := heapInUse()
		st := ix.Stats()
		if n != memoryMemberships || st.Memberships != memoryMemberships || st.Blocks != memoryMemberships {
			b.Fatalf("stored %d, stats %+v; want %d memberships and blocks", n, st, memoryMemberships)
		}
		perMembership = float64(int64(after)-int64(before)) / float64(st.Memberships)
		bytesPerBlock = float64(int64(after)-int64(before)) / float64(st.Blocks)
		runtime.KeepAlive(ix)
		ix.Close()
		b.StartTimer()
	}
	b.ReportMetric(perMembership, "bytes/membership")
	b.ReportMetric(bytesPerBlock, "bytes/block")
}

// BenchmarkMemoryShared measures memory per membership when every block is
// held by four endpoints (2^18 distinct blocks, 2^20 memberships): what a
// fleet whose engines share prompts pays. The four holders store the same
// engine hashes, so the index keeps each (hash, key) pair once and every
// holder a reference to it in its own engine-hash table.
//
// The fleet is 64 endpoints, and each chain's four holders are distinct
// endpoints drawn pseudo-randomly (fixed seed) from it, as the holders of a
// prompt are any engines of a fleet, so that the figure does not depend on
// which IDs hold a block. fleet=64,adjacent is the earlier placement (chain
// c on endpoints 4c … 4c+3 mod 64), for comparison; fleet=1024 draws the
// holders from 1,024 endpoints, whose IDs then usually span 64 or more, so
// that the index keeps each block's memberships in full (not the compact
// form of holders whose IDs span fewer than 64).
func BenchmarkMemoryShared(b *testing.B) {
	b.Run("fleet=64", func(b *testing.B) { benchMemoryShared(b, 64, true) })
	b.Run("fleet=64,adjacent", func(b *testing.B) { benchMemoryShared(b, 64, false) })
	b.Run("fleet=1024", func(b *testing.B) { benchMemoryShared(b, 1024, true) })
}

func benchMemoryShared(b *testing.B, fleet int, random bool) {
	const holders = 4
	var perMembership float64
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		before := heapInUse()
		b.StartTimer()
		ix, err := kvindex.New(kvindex.Config{SweepInterval: -1}, kvindex.Options{})
		if err != nil {
			b.Fatal(err)
		}
		eps := EndpointIDs(fleet)
		bs := ix.BlockSize()
		const chains, chainBlocks = memoryMemberships / holders / 256, 256
		buf := make([]uint32, 0, chainBlocks*bs)
		rng := rand.New(rand.NewPCG(17, 4))
		var hs [holders]int
		for c := 0; c < chains; c++ {
			buf = AppendTokens(buf[:0], 7<<40^uint64(c+1)<<8, chainBlocks*bs)
			for h := range hs {
				hs[h] = (c*holders + h) % fleet
			}
			if random {
				pickDistinct(rng, hs[:], fleet)
			}
			for _, h := range hs {
				if err := StoreChain(ix, eps[h], buf, uint64(c+1)<<20); err != nil {
					b.Fatal(err)
				}
			}
		}
		b.StopTimer()
		after := heapInUse()
		st := ix.Stats()
		if st.Memberships != memoryMemberships || st.Blocks != memoryMemberships/holders {
			b.Fatalf("stats %+v; want %d memberships over %d blocks", st, memoryMemberships, memoryMemberships/holders)
		}
		perMembership = float64(int64(after)-int64(before)) / float64(st.Memberships)
		runtime.KeepAlive(ix)
		ix.Close()
		b.StartTimer()
	}
	b.ReportMetric(perMembership, "bytes/membership")
}

// pickDistinct sets dst to len(dst) distinct values below n drawn from rng.
func pickDistinct(rng *rand.Rand, dst []int, n int) {
	for i := range dst {
	again:
		dst[i] = rng.IntN(n)
		for _, e := range dst[:i] {
			if e == dst[i] {
				goto again
			}
		}
	}
}
