package kvindex_test

import (
	"bytes"
	"fmt"

	"github.com/kvroute/kvroute/kvindex"
)

// Two vLLM endpoints report their cached blocks through KV events; a request
// sharing the prefix is matched against three candidates.
func Example() {
	ix, err := kvindex.New(kvindex.Config{BlockSize: 4}, kvindex.Options{})
	if err != nil {
		panic(err)
	}
	defer ix.Close()

	system := []uint32{101, 7, 42, 9, 55, 13, 8, 21, 34, 2, 77, 5} // 3 blocks of 4 tokens
	store := func(endpoint string, hashes []uint64, tokens []uint32) {
		err := ix.Store(endpoint, &kvindex.StoreEvent{
			EngineHashes: hashes, Tokens: tokens, BlockSize: 4,
			Model: "meta-llama/Llama-3.1-8B-Instruct", Group: 0, Kind: "full_attention",
		})
		if err != nil {
			panic(err)
		}
	}
	store("10.0.0.7:8000", []uint64{0xa1, 0xa2, 0xa3}, system)
	store("10.0.0.8:8000", []uint64{0xb1}, system[:4])

	// The request: the same system prompt plus a question (the partial
	// last block is not keyed).
	prompt := append(append([]uint32{}, system...), 1, 2, 3, 4, 5, 6)
	keys := kvindex.Keys(nil, prompt, ix.BlockSize(), &kvindex.KeyParams{Model: "meta-llama/Llama-3.1-8B-Instruct"})
	var out kvindex.MatchResult
	ix.Match(keys, []string{"10.0.0.7:8000", "10.0.0.8:8000", "10.0.0.9:8000"}, &out)
	for i := range out.Len() {
		fmt.Printf("%s: %d of %d blocks cached (score %.1f)\n", out.Endpoint(i), out.Blocks(i), out.Total, out.Score(i))
	}

	// Route to 10.0.0.9 anyway and mark it warm until its events arrive.
	ix.Speculate("10.0.0.9:8000", keys, 0)
	ix.Match(keys, []string{"10.0.0.9:8000"}, &out)
	e := out.At(0)
	fmt.Printf("%s after Speculate: %d blocks, %d speculative\n", e.Endpoint, e.Blocks, e.Speculative)
	// Output:
	// 10.0.0.7:8000: 3 of 4 blocks cached (score 3.0)
	// 10.0.0.8:8000: 1 of 4 blocks cached (score 1.0)
	// 10.0.0.9:8000: 0 of 4 blocks cached (score 0.0)
	// 10.0.0.9:8000 after Speculate: 4 blocks, 4 speculative
}

// Keys computes the router's block keys for a request; the same keys come
// out of Store for the engine's events.
func ExampleKeys() {
	tokens := []uint32{1, 2, 3, 4, 5, 6, 7, 8}
	keys := kvindex.Keys(nil, tokens, 4, &kvindex.KeyParams{Model: "meta-llama/Llama-3.1-8B-Instruct"})
	fmt.Printf("%#016x %#016x\n", keys[0], keys[1])
	// Output: 0x81f89a972b4283c4 0x1d524bc5a49dcdab
}

// A snapshot of an index, loaded into a fresh one: the same blocks match,
// and the endpoint's stream position travels with its entries.
func ExampleIndex_WriteSnapshot() {
	src, _ := kvindex.New(kvindex.Config{BlockSize: 4, SweepInterval: -1}, kvindex.Options{})
	defer src.Close()
	tokens := []uint32{1, 2, 3, 4, 5, 6, 7, 8}
	pl := src.LockPosition("10.0.0.7:8000") // what an event subscriber holds while it applies a batch
	_ = src.Store("10.0.0.7:8000", &kvindex.StoreEvent{EngineHashes: []uint64{11, 12}, Tokens: tokens,
		BlockSize: 4, Model: "m", Group: 0, Kind: "full_attention"})
	pl.Set([]byte("seq 41"))
	pl.Unlock()

	var buf bytes.Buffer
	if _, err := src.WriteSnapshot(&buf); err != nil {
		fmt.Println(err)
		return
	}
	dst, _ := kvindex.New(kvindex.Config{BlockSize: 4, SweepInterval: -1}, kvindex.Options{})
	defer dst.Close()
	info, err := dst.ReadSnapshot(&buf, kvindex.SnapshotReadOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	var m kvindex.MatchResult
	dst.Match(kvindex.Keys(nil, tokens, 4, &kvindex.KeyParams{Model: "m"}), []string{"10.0.0.7:8000"}, &m)
	pos, _ := dst.Position("10.0.0.7:8000")
	fmt.Println(info.Memberships, "memberships;", m.Blocks(0), "blocks match; position", string(pos))
	// Output: 2 memberships; 2 blocks match; position seq 41
}
