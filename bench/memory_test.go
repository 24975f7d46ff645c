package bench

import (
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
func BenchmarkMemoryShared(b *testing.B) {
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
		eps := EndpointIDs(64)
		bs := ix.BlockSize()
		const chains, chainBlocks = memoryMemberships / holders / 256, 256
		buf := make([]uint32, 0, chainBlocks*bs)
		for c := 0; c < chains; c++ {
			buf = AppendTokens(buf[:0], 7<<40^uint64(c+1)<<8, chainBlocks*bs)
			for h := 0; h < holders; h++ {
				ep := eps[(c*holders+h)%len(eps)]
				if err := StoreChain(ix, ep, buf, uint64(c+1)<<20); err != nil {
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
