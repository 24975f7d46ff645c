package kvindex

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
)

// benchTokens returns n deterministic pseudo-random token IDs seeded by seed.
func benchTokens(seed uint64, n int) []uint32 {
	t := make([]uint32, n)
	x := seed*0x9E3779B97F4A7C15 + 1
	for i := range t {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		t[i] = uint32(x % 150000)
	}
	return t
}

// storeChain stores tokens (a whole number of blocks) for ep as vLLM does:
// events of up to 16 blocks, each chained on the previous event's last hash.
// Engine hashes are derived from hashBase.
func storeChain(tb testing.TB, ix *Index, ep, model string, tokens []uint32, hashBase uint64) {
	bs := ix.BlockSize()
	n := len(tokens) / bs
	hashes := make([]uint64, 0, 16)
	for first := 0; first < n; first += 16 {
		last := min(first+16, n)
		hashes = hashes[:0]
		for i := first; i < last; i++ {
			hashes = append(hashes, hashBase+uint64(i))
		}
		ev := &StoreEvent{
			EngineHashes: hashes, Tokens: tokens[first*bs : last*bs], BlockSize: bs,
			Model: model, Group: 0, Kind: "full_attention",
			HasParent: first > 0, ParentHash: hashBase + uint64(first) - 1,
		}
		if err := ix.Store(ep, ev); err != nil {
			tb.Fatalf("store %s: %v", ep, err)
		}
	}
}

// warmIndex is the index shared by the Match benchmarks: 64 endpoints, at
// least 1,000,000 background blocks, and two prompts stored as prefixes of
// increasing length (candidate c holds the first prefix[c] blocks).
type warmIndex struct {
	ix                 *Index
	endpoints          []string
	prompt2k, prompt8k []uint32
	prefix2k, prefix8k []int // blocks held per candidate
}

var (
	warmOnce sync.Once
	warm     warmIndex
)

const benchModel = "meta-llama/Llama-3.1-8B-Instruct"

func getWarm(b *testing.B) *warmIndex { return getWarmT(b) }

func getWarmT(b testing.TB) *warmIndex {
	warmOnce.Do(func() {
		ix, err := New(Config{SweepInterval: -1}, Options{})
		if err != nil {
			b.Fatal(err)
		}
		w := warmIndex{ix: ix}
		const eps, background = 64, 1 << 20
		perEP := background / eps / DefaultBlockSize * DefaultBlockSize
		for c := 0; c < eps; c++ {
			w.endpoints = append(w.endpoints, fmt.Sprintf("10.0.%d.%d:8000", c/16, c%16))
		}
		// Background: per endpoint, chains of 256 blocks of distinct tokens.
		for c, ep := range w.endpoints {
			for chain := 0; chain < perEP/256; chain++ {
				toks := benchTokens(uint64(c)<<32|uint64(chain), 256*DefaultBlockSize)
				storeChain(b, ix, ep, benchModel, toks, uint64(c)<<48|uint64(chain)<<16)
			}
		}
		w.prompt2k = benchTokens(1<<62, 2048)
		w.prompt8k = benchTokens(1<<61, 8192)
		for c, ep := range w.endpoints {
			n := 1 + c*31/(eps-1) // 1 … 32 blocks
			w.prefix2k = append(w.prefix2k, n)
			storeChain(b, ix, ep, benchModel, w.prompt2k[:n*DefaultBlockSize], uint64(c)<<48|1<<47)
			if c < 8 {
				n8 := 16 * (c + 1) // 16 … 128 blocks
				w.prefix8k = append(w.prefix8k, n8)
				storeChain(b, ix, ep, benchModel, w.prompt8k[:n8*DefaultBlockSize], uint64(c)<<48|1<<46)
			}
		}
		warm = w
	})
	if warm.ix == nil {
		b.Fatal("warm index setup failed")
	}
	return &warm
}

func BenchmarkKeys(b *testing.B) {
	b.Run("tokens=2048", func(b *testing.B) {
		toks := benchTokens(7, 2048)
		p := &KeyParams{Model: benchModel}
		want := Keys(nil, toks, DefaultBlockSize, p)
		dst := make([]Key, 0, 64)
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			dst = Keys(dst, toks, DefaultBlockSize, p)
		}
		b.StopTimer()
		if len(dst) != 32 || dst[31] != want[31] {
			b.Fatalf("keys = %d, last %x; want 32, %x", len(dst), dst[len(dst)-1], want[31])
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/32, "ns/block")
	})
}

func BenchmarkMatch(b *testing.B) {
	for _, tc := range []struct {
		tokens, endpoints int
	}{{2048, 64}, {8192, 8}} {
		b.Run(fmt.Sprintf("tokens=%d/endpoints=%d", tc.tokens, tc.endpoints), func(b *testing.B) {
			w := getWarm(b)
			prompt, prefix := w.prompt2k, w.prefix2k
			if tc.tokens == 8192 {
				prompt, prefix = w.prompt8k, w.prefix8k
			}
			keys := Keys(nil, prompt, DefaultBlockSize, &KeyParams{Model: benchModel})
			cands := w.endpoints[:tc.endpoints]
			var out MatchResult
			w.ix.Match(keys, cands, &out)
			if st := w.ix.Stats(); st.Blocks < 1_000_000 {
				b.Fatalf("warm index has %d blocks, want >= 1,000,000", st.Blocks)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				w.ix.Match(keys, cands, &out)
			}
			b.StopTimer()
			for c, e := range out.Endpoints() {
				if e.Blocks != prefix[c] || e.GPU != prefix[c] || e.Score != float64(prefix[c]) {
					b.Fatalf("candidate %d: %+v, want %d blocks", c, e, prefix[c])
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(keys)), "ns/block")
		})
	}
}

func BenchmarkStore(b *testing.B) {
	b.Run("blocks=16", func(b *testing.B) {
		ix, err := New(Config{SweepInterval: -1}, Options{})
		if err != nil {
			b.Fatal(err)
		}
		// A resident endpoint keeps the index from ever emptying, as in a
		// running router (an empty block map would shrink and regrow).
		for chain := 0; chain < 256; chain++ {
			storeChain(b, ix, "10.1.9.9:8000", benchModel, benchTokens(uint64(chain)|1<<59, 256*DefaultBlockSize), uint64(chain)<<16)
		}
		const eps, perEP = 8, 4096 // events per endpoint before it is cleared
		names := make([]string, eps)
		for i := range names {
			names[i] = fmt.Sprintf("10.1.0.%d:8000", i)
		}
		toks := benchTokens(3, 16*DefaultBlockSize)
		hashes := make([]uint64, 16)
		ev := &StoreEvent{EngineHashes: hashes, Tokens: toks, BlockSize: DefaultBlockSize,
			Model: benchModel, Group: 0, Kind: "full_attention"}
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			ep := i % eps
			if i >= eps && (i/eps)%perEP == 0 { // bound memory: start this endpoint over
				b.StopTimer()
				ix.Clear(names[ep])
				b.StartTimer()
			}
			toks[0] = uint32(i) // a new prefix, so every block is new
			for j := range hashes {
				hashes[j] = uint64(i)<<8 | uint64(j)
			}
			if err := ix.Store(names[ep], ev); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		if st := ix.Stats(); st.Memberships%16 != 0 || st.Memberships <= 256*256 {
			b.Fatalf("stats after store: %+v", st)
		}
		b.ReportMetric(float64(b.N)*16/b.Elapsed().Seconds(), "blocks/s")
	})
}

// BenchmarkMemory measures heap per (block, endpoint) membership with 2^20
// memberships, with every block held by one endpoint (holders=1, nothing
// shared: the worst case) or by four (engines sharing prompts), and reports
// how it splits between the block map (slots and member-array arenas) and
// the engine-hash tables (the endpoints' references and private pairs, and
// the pool of shared pairs, also reported on its own), so that the part to
// work on is visible.
//
// The fleet is 64 endpoints. With four holders, each chain's holders are 4
// distinct endpoints drawn pseudo-randomly (fixed seed) from the fleet, as
// the holders of a prompt are any engines of a fleet (holders=4), so that
// the figure does not depend on which IDs hold a block; holders=4,adjacent
// keeps the earlier placement (chain c on endpoints 4c … 4c+3 mod 64) for
// comparison. holders=4,fleet=1024 draws the holders from 1,024 endpoints:
// their IDs then usually span 64 or more, and the block map keeps every
// membership of such a block in its member array (the full form) instead
// of the two-word form of holders whose IDs span fewer than 64.
func BenchmarkMemory(b *testing.B) {
	b.Run("holders=1", func(b *testing.B) { benchMemory(b, 1, 64, false) })
	b.Run("holders=4", func(b *testing.B) { benchMemory(b, 4, 64, true) })
	b.Run("holders=4,adjacent", func(b *testing.B) { benchMemory(b, 4, 64, false) })
	b.Run("holders=4,fleet=1024", func(b *testing.B) { benchMemory(b, 4, 1024, true) })
}

// pickHolders sets dst to len(dst) distinct endpoints of a fleet of n, drawn
// from rng.
func pickHolders(rng *rand.Rand, dst []int, n int) {
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

func benchMemory(b *testing.B, holders, fleet int, random bool) {
	const memberships, chainBlocks = 1 << 20, 256
	var perMembership, blockMap, engTables, sharedPairs float64
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		b.StartTimer()
		ix, err := New(Config{SweepInterval: -1}, Options{})
		if err != nil {
			b.Fatal(err)
		}
		// Chain c is stored by its holders (random, or endpoints
		// c*holders … c*holders+holders-1 mod fleet), each with the same
		// engine hashes, as engines of one model do.
		rng := rand.New(rand.NewPCG(17, 4))
		hs := make([]int, holders)
		for c := 0; c < memberships/holders/chainBlocks; c++ {
			toks := benchTokens(uint64(c)|1<<60, chainBlocks*DefaultBlockSize)
			if random {
				pickHolders(rng, hs, fleet)
			}
			for h := 0; h < holders; h++ {
				e := (c*holders + h) % fleet
				if random {
					e = hs[h]
				}
				storeChain(b, ix, fmt.Sprintf("10.2.%d.%d:8000", e/16, e%16), benchModel, toks, uint64(c+1)<<20)
			}
		}
		b.StopTimer()
		runtime.GC()
		runtime.ReadMemStats(&after)
		st := ix.Stats()
		if st.Memberships != memberships || st.Blocks != memberships/holders {
			b.Fatalf("stats %+v, want %d memberships over %d blocks", st, memberships, memberships/holders)
		}
		perMembership = float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / memberships
		blockMap = float64(ix.blocks.bytes()) / memberships
		eng := ix.pool.heapBytes()
		sharedPairs = float64(eng) / memberships
		ix.eps.Range(func(_ string, ep *endpoint) bool {
			eng += ep.eng.bytes()
			return true
		})
		engTables = float64(eng) / memberships
		runtime.KeepAlive(ix)
		b.StartTimer()
	}
	b.ReportMetric(perMembership, "bytes/membership")
	b.ReportMetric(blockMap, "blockmap-bytes/membership")
	b.ReportMetric(engTables, "enghash-bytes/membership")
	b.ReportMetric(sharedPairs, "enghash-shared-bytes/membership")
}
