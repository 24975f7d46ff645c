package bench

import (
	"fmt"

	"github.com/kvroute/kvroute/kvindex"
)

// Model is the model name the benchmark fixtures root their block keys in.
const Model = "meta-llama/Llama-3.1-8B-Instruct"

// EventBlocks is how many blocks one fixture BlockStored event carries: vLLM
// publishes one event per scheduler step, typically 16 blocks of a chunked
// prefill.
const EventBlocks = 16

// Tokens returns n deterministic pseudo-random token IDs in [0, 150000)
// derived from seed (xorshift64). Different seeds give unrelated prompts, so
// fixtures built from distinct seeds share no block.
func Tokens(seed uint64, n int) []uint32 {
	return AppendTokens(make([]uint32, 0, n), seed, n)
}

// AppendTokens appends the n tokens of Tokens(seed, n) to dst, so that large
// fixtures can reuse one buffer.
func AppendTokens(dst []uint32, seed uint64, n int) []uint32 {
	x := seed*0x9E3779B97F4A7C15 + 1
	for i := 0; i < n; i++ {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		dst = append(dst, uint32(x%150000))
	}
	return dst
}

// EndpointID returns the deterministic "ip:port" identity of fixture
// endpoint i.
func EndpointID(i int) string {
	return fmt.Sprintf("10.%d.%d.%d:8000", i>>16&255, i>>8&255, i&255)
}

// EndpointIDs returns EndpointID(0) … EndpointID(n-1).
func EndpointIDs(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = EndpointID(i)
	}
	return ids
}

// StoreChain stores tokens (whole blocks; a partial tail is ignored) for
// endpoint as an engine reports them: BlockStored events of up to
// EventBlocks blocks, each chained on the previous event's last engine hash,
// in the GPU tier of cache group 0. Engine hashes are hashBase, hashBase+1,
// …; callers give every chain its own range so that no two chains of one
// endpoint collide.
func StoreChain(ix *kvindex.Index, endpoint string, tokens []uint32, hashBase uint64) error {
	var hashes [EventBlocks]uint64
	bs := ix.BlockSize()
	n := len(tokens) / bs
	for first := 0; first < n; first += EventBlocks {
		last := min(first+EventBlocks, n)
		for i := first; i < last; i++ {
			hashes[i-first] = hashBase + uint64(i)
		}
		ev := kvindex.StoreEvent{
			EngineHashes: hashes[:last-first], Tokens: tokens[first*bs : last*bs], BlockSize: bs,
			Model: Model, Group: 0, Kind: "full_attention",
			HasParent: first > 0, ParentHash: hashBase + uint64(first) - 1,
		}
		if err := ix.Store(endpoint, &ev); err != nil {
			return fmt.Errorf("bench: store %d blocks for %s: %w", last-first, endpoint, err)
		}
	}
	return nil
}

// Background stores memberships distinct blocks spread evenly over
// endpoints, as chains of chainBlocks blocks whose tokens derive from seed:
// the resident population of a warm index, none of it shared between
// endpoints (the worst case for memory). It returns the number of blocks
// stored, a multiple of chainBlocks no larger than memberships.
func Background(ix *kvindex.Index, endpoints []string, memberships, chainBlocks int, seed uint64) (int, error) {
	if len(endpoints) == 0 || chainBlocks <= 0 {
		return 0, nil
	}
	bs := ix.BlockSize()
	chains := memberships / chainBlocks
	buf := make([]uint32, 0, chainBlocks*bs)
	for c := 0; c < chains; c++ {
		ep := c % len(endpoints)
		buf = AppendTokens(buf[:0], seed<<40^uint64(c+1)<<8, chainBlocks*bs)
		// Engine hashes: per endpoint, chain c occupies its own range.
		if err := StoreChain(ix, endpoints[ep], buf, uint64(c+1)<<20); err != nil {
			return c * chainBlocks, err
		}
	}
	return chains * chainBlocks, nil
}

// Staircase stores, for each endpoint i of endpoints, the first blocks[i]
// blocks of prompt, so that a Match of prompt against endpoints has a known
// answer. Engine hashes derive from hashBase and the endpoint's position.
func Staircase(ix *kvindex.Index, endpoints []string, prompt []uint32, blocks []int, hashBase uint64) error {
	bs := ix.BlockSize()
	for i, ep := range endpoints {
		if err := StoreChain(ix, ep, prompt[:blocks[i]*bs], hashBase+uint64(i)<<24); err != nil {
			return err
		}
	}
	return nil
}

// Steps returns n prefix lengths spread evenly over 1 … maxBlocks (endpoint
// i holds 1 + i·(maxBlocks−1)/(n−1) blocks), so that the last endpoint
// holds the whole prompt.
func Steps(n, maxBlocks int) []int {
	out := make([]int, n)
	for i := range out {
		if n == 1 {
			out[i] = maxBlocks
			continue
		}
		out[i] = 1 + i*(maxBlocks-1)/(n-1)
	}
	return out
}
