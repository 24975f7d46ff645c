package enginemetrics_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/enginemetrics"
)

// A Scraper watches an engine's /metrics; an admission stage asks it whether
// the engine is saturated, and falls back to its own accounting while the
// answer is not known.
func Example() {
	engine := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="Qwen/Qwen3-0.6B"} 7
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="Qwen/Qwen3-0.6B"} 256
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="Qwen/Qwen3-0.6B"} 0.62
`)
	}))
	defer engine.Close()

	s, err := enginemetrics.New(enginemetrics.Config{
		Interval: 100 * time.Millisecond, Staleness: time.Minute, WaitingThreshold: 5, KVCacheThreshold: 0.9,
	}, enginemetrics.Options{})
	if err != nil {
		panic(err)
	}
	defer s.Close()
	ep := kvroute.Endpoint{ID: strings.TrimPrefix(engine.URL, "http://")}
	saturated, known := s.Saturation(ep)
	fmt.Println("before any scrape: saturated", saturated, "known", known)

	s.SetEndpoints([]kvroute.Endpoint{ep})
	for !known { // the first scrape starts at once
		time.Sleep(time.Millisecond)
		saturated, known = s.Saturation(ep)
	}
	sig, _ := s.Signal(ep)
	fmt.Println("waiting", sig.Waiting, "running", sig.Running, "KV cache", sig.KVCacheUsage)
	fmt.Println("saturated", saturated, "known", known)
	// Output:
	// before any scrape: saturated false known false
	// waiting 7 running 256 KV cache 0.62
	// saturated true known true
}

// PeerLoads estimates what other gateway replicas hold on each engine: the
// engine reports 6 requests, this replica has 2 open there (one of them
// still prefilling 2,048 tokens), so 4 are the others', each charged this
// replica's 1,024 tokens per open request.
func ExamplePeerLoads() {
	sigs := map[string]enginemetrics.Signal{"10.0.0.7:8000": {Waiting: 2, Running: 4}}
	own := func(string) (tokens, requests int64) { return 2048, 2 }
	fmt.Println(enginemetrics.PeerLoads(sigs, own))
	// Output: map[10.0.0.7:8000:{4096 4}]
}
