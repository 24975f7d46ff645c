package kvroute_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/kvindex"
	"github.com/kvroute/kvroute/render"
)

// A gateway's request loop: Pick → forward → FirstChunk on the first bytes →
// Done at the end. Here the engines are plain HTTP test servers and the index
// is fed directly, as the KV-event subscriber would after an engine cached a
// shared system prompt.
func Example() {
	engine := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, `{"choices":[{"text":"ok"}]}`)
	}))
	defer engine.Close()
	eps := []kvroute.Endpoint{
		{ID: "10.0.0.1:8000", Address: engine.URL},
		{ID: "10.0.0.2:8000", Address: engine.URL},
	}

	cfg := kvroute.DefaultConfig()
	cfg.Model = "my-model"
	cfg.Events.Enabled = new(false) // this example feeds the index itself
	cfg.DisableRender = true        // and passes already-rendered prompts
	router, err := kvroute.New(context.Background(), cfg, kvroute.Options{})
	if err != nil {
		panic(err)
	}
	defer router.Close()

	system := make([]uint32, 2048) // a 2,048-token shared system prompt
	for i := range system {
		system[i] = uint32(1000 + i)
	}
	hashes := make([]uint64, len(system)/64)
	for i := range hashes {
		hashes[i] = uint64(i + 1)
	}
	// Engine 2 reports that it cached the system prompt.
	if err := router.Index().Store("10.0.0.2:8000", &kvindex.StoreEvent{
		EngineHashes: hashes, Tokens: system, BlockSize: 64, Model: "my-model", Group: -1,
	}); err != nil {
		panic(err)
	}

	for i := 0; i < 3; i++ {
		prompt := append(append([]uint32{}, system...), uint32(50+i), uint32(60+i))
		d, err := router.Pick(context.Background(), &kvroute.Request{Prompts: []render.Prompt{{TokenIDs: prompt}}}, eps)
		if err != nil {
			panic(err)
		}
		resp, err := http.Post(d.Endpoint.URL()+"/v1/completions", "application/json", strings.NewReader(`{}`))
		if err != nil {
			d.Done(kvroute.DoneInfo{Err: err})
			continue
		}
		buf := make([]byte, 1)
		if _, err := resp.Body.Read(buf); err == nil {
			d.FirstChunk() // the engine finished prefill: release the prompt tokens
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		d.Done(kvroute.DoneInfo{}) // release the request
		fmt.Printf("request %d → %s, %d of %d prompt tokens predicted cached (%s)\n",
			i, d.Endpoint.ID, d.CachedTokens, d.PromptTokens, d.Outcome)
	}
	// Output:
	// request 0 → 10.0.0.2:8000, 2048 of 2050 prompt tokens predicted cached (sticky)
	// request 1 → 10.0.0.2:8000, 2048 of 2050 prompt tokens predicted cached (sticky)
	// request 2 → 10.0.0.2:8000, 2048 of 2050 prompt tokens predicted cached (sticky)
}

// A host with separate hooks runs the stages itself: match, filter, score,
// commit its own choice, and release the load by request ID from the hooks
// that see only the ID.
func ExampleRouter_Match() {
	cfg := kvroute.DefaultConfig()
	cfg.Model = "my-model"
	cfg.Events.Enabled = new(false) // this example feeds the index itself
	cfg.DisableRender = true        // and passes already-rendered prompts
	router, err := kvroute.New(context.Background(), cfg, kvroute.Options{})
	if err != nil {
		panic(err)
	}
	defer router.Close()
	eps := []kvroute.Endpoint{{ID: "10.0.0.1:8000"}, {ID: "10.0.0.2:8000"}}
	prompt := make([]uint32, 640) // 10 blocks of 64 tokens
	for i := range prompt {
		prompt[i] = uint32(7000 + i)
	}
	hashes := make([]uint64, 10)
	for i := range hashes {
		hashes[i] = uint64(i + 1)
	}
	if err := router.Index().Store("10.0.0.1:8000", &kvindex.StoreEvent{
		EngineHashes: hashes, Tokens: prompt, BlockSize: 64, Model: "my-model", Group: -1,
	}); err != nil {
		panic(err)
	}

	// Request-body hook.
	req := &kvroute.Request{ID: "req-42", Prompts: []render.Prompt{{TokenIDs: prompt}}}
	sel, err := router.Match(context.Background(), req, eps)
	if err != nil {
		panic(err)
	}
	for i := 0; i < sel.Len(); i++ {
		c := sel.Candidate(i)
		fmt.Printf("%s holds %d blocks, would prefill %d tokens\n",
			c.Endpoint.ID, c.Match.Blocks, c.UncachedTokens)
	}
	kept, outcome := sel.Filter()
	best, _ := sel.Score()
	fmt.Printf("filter kept %v (%s); best %s\n", kept, outcome, sel.Candidate(best).Endpoint.ID)
	d, err := sel.Commit(best)
	sel.Release()
	if err != nil {
		panic(err)
	}
	tokens, _, _ := router.Load().Load(d.Endpoint.ID)
	fmt.Println("committed load:", tokens, "tokens")

	// Response-headers and stream-end hooks, with only the ID: the router
	// finds the request's Decision by it until its Done.
	router.Decision("req-42").FirstChunk()
	router.Decision("req-42").Done(kvroute.DoneInfo{})
	fmt.Println("done:", router.Decision("req-42") == nil)
	// Output:
	// 10.0.0.1:8000 holds 10 blocks, would prefill 0 tokens
	// 10.0.0.2:8000 holds 0 blocks, would prefill 640 tokens
	// filter kept [0] (sticky); best 10.0.0.1:8000
	// committed load: 0 tokens
	// done: true
}
