package bench

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/kvroute/kvroute/kvindex"
)

// sharedFleet is the index of BenchmarkRatio's
// Match/tokens=2048/endpoints=64,holders=4: the case a fleet serving
// popular prefixes is in, where every block is held by several engines.
// blocks distinct blocks are each held by four of 64 endpoints, drawn
// pseudo-randomly (fixed seed) per chain of 256 blocks and stored by each
// holder through Index.Store with the same engine hashes: 4 × blocks
// memberships. One 2,048-token prompt is then held by seven of the 64,
// also drawn at random, as prefixes of sharedPrefixes blocks, so that its
// 32 blocks have four holders on average (seven on the first, two on the
// last) and every candidate's Match answer is known.
//
// The prompt is stored last, so its blocks are the newest, as the blocks a
// router looks up mostly are (a conversation's previous turn, a document
// just sent); with oldest set it is stored first, before every other
// block, so that every later insert may push its blocks along their probe.
// 2^20 blocks are as many as FloorMatch's map has entries and the warm
// index has background blocks; 3 × 2^19 are a count where shards end
// fuller.
type sharedFleet struct {
	ix        *kvindex.Index
	endpoints []string // the 64 candidates
	prompt    []uint32
	steps     []int // blocks of prompt held by endpoints[c]
}

const (
	sharedEndpoints   = 64
	sharedHolders     = 4
	sharedChainBlocks = 256
)

// sharedPrefixes are the prompt holders' prefix lengths in blocks: two hold
// the whole 32-block prompt, the others shorter prefixes; 128 memberships
// over 32 blocks, four per block on average.
var sharedPrefixes = []int{32, 32, 24, 16, 12, 8, 4}

// sharedKey names a shared fleet: its block count and whether its prompt is
// its oldest blocks.
type sharedKey struct {
	blocks int
	oldest bool
}

var (
	sharedMu     sync.Mutex
	sharedFleets = map[sharedKey]*sharedFleet{}
)

// getShared builds the shared fleet of this many blocks once per process
// (a few seconds each).
func getShared(b *testing.B, blocks int, oldest bool) *sharedFleet {
	b.Helper()
	sharedMu.Lock()
	defer sharedMu.Unlock()
	k := sharedKey{blocks, oldest}
	if f := sharedFleets[k]; f != nil {
		return f
	}
	f, err := buildShared(blocks, oldest)
	if err != nil {
		b.Fatalf("shared index of %d blocks: %v", blocks, err)
	}
	sharedFleets[k] = f
	return f
}

func buildShared(blocks int, oldest bool) (*sharedFleet, error) {
	ix, err := kvindex.New(kvindex.Config{SweepInterval: -1}, kvindex.Options{})
	if err != nil {
		return nil, err
	}
	f := &sharedFleet{ix: ix, endpoints: EndpointIDs(sharedEndpoints)}
	bs := ix.BlockSize()
	buf := make([]uint32, 0, sharedChainBlocks*bs)
	rng := rand.New(rand.NewPCG(17, 4))
	// The prompt's holders come from their own stream, so that they are
	// the same whether the prompt is stored first or last.
	prng := rand.New(rand.NewPCG(23, 4))
	total := 0
	storePrompt := func() error {
		f.prompt = Tokens(1<<59, 2048)
		f.steps = make([]int, sharedEndpoints)
		holders := make([]int, len(sharedPrefixes))
		pickDistinct(prng, holders, sharedEndpoints)
		for i, h := range holders {
			f.steps[h] = sharedPrefixes[i]
			total += sharedPrefixes[i]
			if err := StoreChain(ix, f.endpoints[h], f.prompt[:sharedPrefixes[i]*bs], 5<<50); err != nil {
				return err
			}
		}
		return nil
	}
	if oldest {
		if err := storePrompt(); err != nil {
			return nil, err
		}
	}
	var hs [sharedHolders]int
	for c := 0; c < blocks/sharedChainBlocks; c++ {
		buf = AppendTokens(buf[:0], 9<<40^uint64(c+1)<<8, sharedChainBlocks*bs)
		pickDistinct(rng, hs[:], sharedEndpoints)
		for _, h := range hs {
			if err := StoreChain(ix, f.endpoints[h], buf, uint64(c+1)<<20); err != nil {
				return nil, err
			}
		}
	}
	if !oldest {
		if err := storePrompt(); err != nil {
			return nil, err
		}
	}
	st := ix.Stats()
	if st.Blocks != blocks+32 || st.Memberships != sharedHolders*blocks+total {
		return nil, fmt.Errorf("stats %+v; want %d blocks and %d memberships",
			st, blocks+32, sharedHolders*blocks+total)
	}
	return f, nil
}

// benchMatchShared is BenchmarkRatio's Match/tokens=2048/endpoints=64,holders=4:
// Match of the prompt of the shared fleet of this many blocks against its
// 64 endpoints, interleaved with FloorMatch built for the same answer over
// as many entries, every candidate's result checked.
func benchMatchShared(b *testing.B, blocks int, oldest bool) {
	f := getShared(b, blocks, oldest)
	keys := kvindex.Keys(nil, f.prompt, f.ix.BlockSize(), &kvindex.KeyParams{Model: Model})
	var out kvindex.MatchResult
	f.ix.Match(keys, f.endpoints, &out)
	floor, check := floorMatch(f.steps, blocks)
	interleave(b, func() { f.ix.Match(keys, f.endpoints, &out) }, floor, func() {})
	if err := check(); err != nil {
		b.Fatal(err)
	}
	n := 0
	for c, e := range out.Endpoints() {
		if e.Blocks != f.steps[c] || e.GPU != f.steps[c] {
			b.Fatalf("candidate %d: %+v, want %d GPU blocks", c, e, f.steps[c])
		}
		n++
	}
	if n != sharedEndpoints {
		b.Fatalf("%d results, want %d", n, sharedEndpoints)
	}
}
