package lora_test

import (
	"context"
	"fmt"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/enginemetrics"
	"github.com/kvroute/kvroute/lora"
	"github.com/kvroute/kvroute/render"
)

// fixed is a Source standing in for an enginemetrics.Scraper.
type fixed map[string]enginemetrics.LoRAInfo

func (f fixed) Signal(ep kvroute.Endpoint) (enginemetrics.Signal, bool) {
	info, ok := f[ep.ID]
	return enginemetrics.Signal{LoRA: info}, ok
}

// A request for adapter "sql" goes to the engine running it.
func Example() {
	src := fixed{
		"10.0.0.1:8000": {Reported: true, Running: []string{"chat", "code"}, MaxLoRA: 2},
		"10.0.0.2:8000": {Reported: true, Running: []string{"sql"}, MaxLoRA: 2},
	}
	scorer, err := lora.New(lora.Config{}, src, lora.Options{})
	if err != nil {
		panic(err)
	}
	defer scorer.Close()

	cfg := kvroute.DefaultConfig()
	cfg.Model = "base-model"
	cfg.Events.Enabled = new(false)
	cfg.DisableRender = true
	router, err := kvroute.New(context.Background(), cfg, kvroute.Options{Scorers: []kvroute.WeightedScorer{scorer.Weighted()}})
	if err != nil {
		panic(err)
	}
	defer router.Close()

	eps := []kvroute.Endpoint{{ID: "10.0.0.1:8000"}, {ID: "10.0.0.2:8000"}}
	req := &kvroute.Request{LoRA: "sql", Prompts: []render.Prompt{{TokenIDs: []uint32{1, 2, 3, 4}}}}
	d, err := router.Pick(context.Background(), req, eps)
	if err != nil {
		panic(err)
	}
	defer d.Done(kvroute.DoneInfo{})
	fmt.Println(d.Endpoint.ID)
	// Output: 10.0.0.2:8000
}
