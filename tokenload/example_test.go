package tokenload_test

import (
	"fmt"

	"github.com/kvroute/kvroute/tokenload"
)

// A gateway loop: score the candidates, dispatch to the best one, release the
// prefill tokens on the first response chunk and the request when it ends.
func Example() {
	tracker, err := tokenload.NewTracker(tokenload.Options{})
	if err != nil {
		panic(err)
	}
	// Earlier traffic: a long uncached prompt is still prefilling on .1.
	busy := tracker.Dispatch("10.0.0.1:8000", 1_000_000)

	// A 2,100-token prompt (32 full blocks of 64 + a 52-token tail); .1 holds
	// 30 of the blocks, .2 holds none.
	const input, total, blockSize = 2100, 32, 64
	candidates := map[string]float64{"10.0.0.1:8000": 30, "10.0.0.2:8000": 0}
	best, bestScore, bestUncached := "", -1.0, int64(0)
	for _, ep := range []string{"10.0.0.1:8000", "10.0.0.2:8000"} {
		uncached := tokenload.UncachedTokens(input, total, candidates[ep], blockSize)
		committed, _, _ := tracker.Load(ep)
		score := tokenload.Score(committed, uncached, 0)
		fmt.Printf("%s uncached=%d score=%.4f\n", ep, uncached, score)
		if score > bestScore {
			best, bestScore, bestUncached = ep, score, uncached
		}
	}

	h := tracker.Dispatch(best, bestUncached)
	tokens, requests, _ := tracker.Load(best)
	fmt.Printf("dispatched to %s: %d tokens, %d request\n", best, tokens, requests)
	h.FirstChunk() // first SSE chunk forwarded to the client
	h.Done()       // response complete (or failed, or aborted)
	busy.Done()
	tokens, requests, _ = tracker.Load(best)
	fmt.Printf("after done: %d tokens, %d requests\n", tokens, requests)
	// Output:
	// 10.0.0.1:8000 uncached=180 score=0.7615
	// 10.0.0.2:8000 uncached=2100 score=0.9995
	// dispatched to 10.0.0.2:8000: 2100 tokens, 1 request
	// after done: 0 tokens, 0 requests
}

// An ext_proc-style host: each hook has only the request ID.
func ExampleRequestTable() {
	tracker, err := tokenload.NewTracker(tokenload.Options{})
	if err != nil {
		panic(err)
	}
	table, err := tokenload.NewRequestTable(tokenload.RequestTableConfig{}, tokenload.Options{})
	if err != nil {
		panic(err)
	}
	// Request-body hook: route and file the accounting under the ID.
	if err := table.Register("req-42", tracker.Dispatch("10.0.0.1:8000", 2048)); err != nil {
		panic(err)
	}
	tokens, requests, _ := tracker.Load("10.0.0.1:8000")
	fmt.Println("dispatched:", tokens, "tokens,", requests, "request")
	table.FirstChunk("req-42") // response-headers hook
	fmt.Println("stream end known:", table.Done("req-42"), "; again:", table.Done("req-42"))
	tokens, requests, _ = tracker.Load("10.0.0.1:8000")
	fmt.Println("after:", tokens, "tokens,", requests, "requests")
	// Output:
	// dispatched: 2048 tokens, 1 request
	// stream end known: true ; again: false
	// after: 0 tokens, 0 requests
}
