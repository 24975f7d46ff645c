package simengine_test

import (
	"fmt"
	"strings"
	"time"

	"github.com/kvroute/kvroute/simengine"
)

// Example runs two requests that share a system prompt through a virtual-clock
// engine: the second one hits the cached prefix, so it reports cached tokens,
// a shorter time to first token, and no BlockStored for the shared blocks.
func Example() {
	var stored int
	sink := simengine.EventSinkFunc(func(b simengine.EventBatch) {
		for _, ev := range b.Events {
			if ev.Type == simengine.BlockStored {
				stored += len(ev.BlockHashes)
			}
		}
	})
	e, err := simengine.New(simengine.Config{Model: "demo", BlockSize: 16, Sink: sink}, simengine.Options{})
	if err != nil {
		panic(err)
	}
	defer e.Close()

	system := "You are a helpful assistant. Answer in one short sentence, and be precise about units."
	for _, question := range []string{"How far is the Moon?", "How hot is the Sun?"} {
		prompt, _ := simengine.ApplyChatTemplate(nil, []simengine.Message{
			{Role: "system", Content: system + " " + system + " " + system},
			{Role: "user", Content: question},
		}, "", true)
		stored = 0
		_, err := e.Submit(simengine.Request{Prompt: prompt, MaxTokens: 4, OnDone: func(r simengine.Result) {
			fmt.Printf("prompt=%d cached=%d ttft=%v blocks stored=%d\n", r.PromptTokens, r.CachedTokens, r.TTFT(), stored)
		}})
		if err != nil {
			panic(err)
		}
		e.RunUntilIdle()
	}
	// Output:
	// prompt=65 cached=0 ttft=16.5ms blocks stored=4
	// prompt=65 cached=48 ttft=11.7ms blocks stored=1
}

// Example_fleet drives two virtual-clock engines the way a routing simulation
// does: before each arrival, every engine is advanced to the arrival time;
// here requests sharing a prefix go to engine 0, others to engine 1.
func Example_fleet() {
	var fleet []*simengine.Engine
	for range 2 {
		e, err := simengine.New(simengine.Config{BlockSize: 16}, simengine.Options{})
		if err != nil {
			panic(err)
		}
		defer e.Close()
		fleet = append(fleet, e)
	}
	start := fleet[0].Now()
	shared := simengine.Tokenize(nil, strings.Repeat("a long shared system prompt ", 20))
	for i := range 6 {
		at := start.Add(time.Duration(i) * 50 * time.Millisecond)
		for _, e := range fleet {
			e.AdvanceTo(at)
		}
		prompt := simengine.Tokenize(nil, fmt.Sprintf("unrelated request number %d", i))
		target := fleet[1]
		if i%2 == 0 {
			prompt = append(append([]uint32{}, shared...), simengine.Tokenize(nil, fmt.Sprintf(" question %d", i))...)
			target = fleet[0]
		}
		if _, err := target.Submit(simengine.Request{Prompt: prompt, MaxTokens: 8}); err != nil {
			panic(err)
		}
	}
	for i, e := range fleet {
		e.RunUntilIdle()
		st := e.Stats()
		fmt.Printf("engine %d: %d requests, hit rate %.2f\n", i, st.RequestSuccess, float64(st.PrefixCacheHits)/float64(st.PrefixCacheQueries))
	}
	// Output:
	// engine 0: 3 requests, hit rate 0.62
	// engine 1: 3 requests, hit rate 0.00
}
