package lora

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/enginemetrics"
	"github.com/kvroute/kvroute/render"
)

// staticSource is a Source with fixed states, set by tests.
type staticSource struct {
	mu      sync.RWMutex
	state   map[string]enginemetrics.LoRAInfo
	fresh   map[string]bool
	waiting map[string]int
}

func newStatic() *staticSource {
	return &staticSource{state: map[string]enginemetrics.LoRAInfo{}, fresh: map[string]bool{}, waiting: map[string]int{}}
}

func (s *staticSource) set(id string, info enginemetrics.LoRAInfo, fresh bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.state[id], s.fresh[id] = info, fresh
}

func (s *staticSource) Signal(ep kvroute.Endpoint) (enginemetrics.Signal, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return enginemetrics.Signal{LoRA: s.state[ep.ID], Waiting: s.waiting[ep.ID]}, s.fresh[ep.ID]
}

func (s *staticSource) setWaiting(id string, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.waiting[id] = n
}

// testRouter builds a Router without events or render (prompts are given)
// with the scorers given.
func testRouter(tb testing.TB, scorers ...kvroute.WeightedScorer) *kvroute.Router {
	tb.Helper()
	cfg := kvroute.DefaultConfig()
	cfg.Model = "base-model"
	cfg.Events.Enabled = new(false)
	cfg.DisableRender = true
	r, err := kvroute.New(context.Background(), cfg, kvroute.Options{Scorers: scorers})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(r.Close)
	return r
}

func endpoints(n int) []kvroute.Endpoint {
	eps := make([]kvroute.Endpoint, n)
	for i := range eps {
		eps[i] = kvroute.Endpoint{ID: fmt.Sprintf("10.0.0.%d:8000", i+1)}
	}
	return eps
}

func request(adapter string, tokens int) *kvroute.Request {
	p := make([]uint32, tokens)
	for i := range p {
		p[i] = uint32(i + 7)
	}
	return &kvroute.Request{LoRA: adapter, Prompts: []render.Prompt{{TokenIDs: p}}}
}
