package e2e

import (
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// Options configure Run. The zero value runs the full demo; Fast shortens
// every wait and load for a quick look (and for tests).
type Options struct {
	// Fast shortens the burst interval and the comparison load.
	Fast bool
	// Model is the model name the engines serve. Default DefaultModel.
	Model string
	// Engines is the number of simulated engines. Default 2.
	Engines int
	// BlockSize is the engines' KV block size in tokens. Default 64.
	BlockSize int
	// EngineBlocks is each engine's KV-cache capacity in blocks. The default
	// (128 blocks, 8,192 tokens) holds about four of the comparison's eight
	// shared prefixes: the half of them precise routing sends to each engine,
	// not all of them, which round-robin sends everywhere.
	EngineBlocks int
	// PrefillTokensPerSecond and DecodeStep set the engines' speed (defaults
	// 10,000 tokens/s and 10 ms per step).
	PrefillTokensPerSecond float64
	DecodeStep             time.Duration
	// PrefixTokens is the length of the shared prefixes. Default 2,000.
	PrefixTokens int
	// BurstRequests is the number of requests of the burst. Default 10.
	BurstRequests int
	// Interval separates the burst's requests. Default 3 s (Fast: 100 ms).
	Interval time.Duration
	// LoadRequests is the number of requests per policy in the comparison.
	// Default 240 (Fast: 48).
	LoadRequests int
	// LoadConcurrency is the number of concurrent clients in the comparison.
	// Default 4.
	LoadConcurrency int
	// LoadGroups is the number of distinct shared prefixes in the
	// comparison. Default 8.
	LoadGroups int
	// ReplayBufferSteps is the engines' KV-event replay buffer in batches
	// (vLLM's buffer_steps; default 64, Fast: 16 — vLLM's default is 10,000,
	// kept small so that step 4 outlives it in seconds).
	ReplayBufferSteps int
	// Hold keeps the engines and gateways running after the demo until the
	// context ends, for curl and a metrics look.
	Hold bool
	// Logger receives the components' logs; nil discards them.
	Logger *slog.Logger
}

// DefaultModel is the demo's model name.
const DefaultModel = "sim-model"

func (o Options) withDefaults() (Options, error) {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	if o.Model == "" {
		o.Model = DefaultModel
	}
	def(&o.Engines, 2)
	def(&o.BlockSize, 64)
	def(&o.EngineBlocks, 128)
	def(&o.PrefixTokens, 2000)
	def(&o.BurstRequests, 10)
	def(&o.LoadConcurrency, 4)
	def(&o.LoadGroups, 8)
	if o.PrefillTokensPerSecond == 0 {
		o.PrefillTokensPerSecond = 10_000
	}
	if o.DecodeStep == 0 {
		o.DecodeStep = 10 * time.Millisecond
	}
	if o.Fast {
		def(&o.ReplayBufferSteps, 16)
		def(&o.LoadRequests, 48)
		if o.Interval == 0 {
			o.Interval = 100 * time.Millisecond
		}
	} else {
		def(&o.ReplayBufferSteps, 64)
		def(&o.LoadRequests, 240)
		if o.Interval == 0 {
			o.Interval = 3 * time.Second
		}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	var errs []error
	positive := func(name string, v int) {
		if v < 1 {
			errs = append(errs, fmt.Errorf("%s must be >= 1, got %d", name, v))
		}
	}
	positive("engines", o.Engines)
	positive("blockSize", o.BlockSize)
	positive("engineBlocks", o.EngineBlocks)
	positive("prefixTokens", o.PrefixTokens)
	positive("burstRequests", o.BurstRequests)
	positive("loadRequests", o.LoadRequests)
	positive("loadConcurrency", o.LoadConcurrency)
	positive("loadGroups", o.LoadGroups)
	positive("replayBufferSteps", o.ReplayBufferSteps)
	if o.Interval < 0 || o.DecodeStep < 0 || !(o.PrefillTokensPerSecond > 0) {
		errs = append(errs, errors.New("interval and decodeStep must be >= 0, prefillTokensPerSecond > 0"))
	}
	if need := (o.PrefixTokens + 200) / o.BlockSize; o.EngineBlocks < need {
		errs = append(errs, fmt.Errorf("engineBlocks %d cannot hold one %d-token prompt", o.EngineBlocks, o.PrefixTokens))
	}
	if err := errors.Join(errs...); err != nil {
		return o, fmt.Errorf("demo options: %w", err)
	}
	return o, nil
}

// Report is what Run measured.
type Report struct {
	// Engines are the engines' endpoint IDs (ip:port), in start order.
	Engines []string
	// Burst is the shared-prefix burst of step 2.
	Burst Burst
	// Comparison holds one row per routing policy (step 3).
	Comparison []PolicyResult
	// EventBatches is the number of KV-event batches the router applied.
	EventBatches uint64
	// Restart is step 4: the gateway restarted on a warm fleet, without
	// and with the index checkpoint.
	Restart RestartResult
	// Accuracy is step 6: the closed loop on the index's accuracy.
	Accuracy AccuracyResult
	// Snapshot is step 5: a restart with no checkpoint and no peer, from
	// the replay buffers alone and from the engines' snapshots.
	Snapshot SnapshotResult
}

// Burst is the result of the shared-prefix burst.
type Burst struct {
	Requests int
	// Routed counts the requests the gateway sent to each engine (by ID).
	Routed map[string]int
	// Succeeded is each engine's vllm:request_success_total increase.
	Succeeded map[string]float64
	// HitRate is each engine's prefix-cache hit rate over the burst
	// (vllm:prefix_cache_hits_total / vllm:prefix_cache_queries_total
	// increases); NaN for an engine that got no query.
	HitRate map[string]float64
	// Top is the engine that served the most requests.
	Top string
	// PredictedCachedShare is the router's predicted cached share of the
	// burst's prompt tokens (llm_d_epp_prefix_predicted_cached_tokens_sum /
	// llm_d_epp_prefix_prompt_tokens_sum increases).
	PredictedCachedShare float64
}

// PolicyResult is one row of the comparison table.
type PolicyResult struct {
	Policy   string
	Requests int
	// HitRate is the engines' combined prefix-cache hit rate over the run.
	HitRate float64
	// TTFTP50 and TTFTP90 are client-side times to the first streamed event.
	TTFTP50, TTFTP90 time.Duration
	// Routed counts requests per engine ID.
	Routed map[string]int
}
