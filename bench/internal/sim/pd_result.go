package sim

import (
	"time"
)

// PDResult is one policy's outcome on one P/D run.
type PDResult struct {
	Policy PDPolicy `json:"policy"`
	Load   float64  `json:"load"`
	// OfferedQPS is Load × the measured capacity.
	OfferedQPS float64 `json:"offeredQPS"`
	// Requests arrived; Completed finished with every answer token.
	Requests  int `json:"requests"`
	Completed int `json:"completed"`
	// TTFTP50 and TTFTP90 are the time from arrival at the gateway to the
	// decode engine's first token (a split request's prefill, its queue
	// and its KV transfer included).
	TTFTP50 time.Duration `json:"ttftP50"`
	TTFTP90 time.Duration `json:"ttftP90"`
	// ITLP50 and ITLP90 are the requests' mean inter-token times (from the
	// first token to the last, over the tokens after the first).
	ITLP50 time.Duration `json:"itlP50"`
	ITLP90 time.Duration `json:"itlP90"`
	// OutputThroughput is the answer tokens generated per second of
	// Makespan, the virtual time from the first arrival to the last
	// completion.
	OutputThroughput float64       `json:"outputThroughput"`
	Makespan         time.Duration `json:"makespan"`
	// SplitRate is the share of requests prefilled on a prefill engine.
	SplitRate float64 `json:"splitRate"`
	// HitRate is the prompt tokens served from an engine's prefix cache
	// over those looked up (a split request is looked up on both engines;
	// a pulled token counts as looked up and not hit on its decoder).
	HitRate float64 `json:"hitRate"`
	// PromptTokens sums the requests' prompts. LookedUpTokens sums the
	// prompts over the engines that admitted them (a split request's on
	// both), each looked-up token either CachedTokens (a prefix-cache
	// hit), ComputedPromptTokens (prefilled there) or PulledTokens (pulled
	// by a decoder from its prefiller).
	PromptTokens         int64 `json:"promptTokens"`
	LookedUpTokens       int64 `json:"lookedUpTokens"`
	CachedTokens         int64 `json:"cachedTokens"`
	ComputedPromptTokens int64 `json:"computedPromptTokens"`
	PulledTokens         int64 `json:"pulledTokens"`
	// PrefillComputeShare is the prompt tokens computed on prefill-role
	// engines over all prompt tokens computed (0 for aggregated).
	PrefillComputeShare float64 `json:"prefillComputeShare"`
	// Wall is the host time of the run.
	Wall time.Duration `json:"wall"`
}

func (r *pdRun) result() PDResult {
	res := PDResult{Policy: r.policy, Load: r.cfg.Load, OfferedQPS: r.cfg.Load * r.cfg.Capacity, Requests: len(r.reqs)}
	var ttft, itl []time.Duration
	var last time.Time
	var out int64
	split := 0
	for _, rq := range r.reqs {
		res.PromptTokens += int64(len(rq.prompt))
		if rq.prefill >= 0 {
			split++
		}
		if rq.first.IsZero() {
			continue
		}
		ttft = append(ttft, rq.first.Sub(rq.arrived))
		if rq.finish.IsZero() {
			continue
		}
		res.Completed++
		out += int64(r.cfg.Workload.OutputTokens)
		if n := r.cfg.Workload.OutputTokens - 1; n > 0 {
			itl = append(itl, rq.finish.Sub(rq.first)/time.Duration(n))
		}
		if rq.finish.After(last) {
			last = rq.finish
		}
	}
	res.TTFTP50, res.TTFTP90 = percentile(ttft, 0.5), percentile(ttft, 0.9)
	res.ITLP50, res.ITLP90 = percentile(itl, 0.5), percentile(itl, 0.9)
	if len(r.reqs) > 0 {
		res.SplitRate = float64(split) / float64(len(r.reqs))
		if !last.IsZero() {
			res.Makespan = last.Sub(r.reqs[0].arrived)
		}
	}
	if res.Makespan > 0 {
		res.OutputThroughput = float64(out) / res.Makespan.Seconds()
	}
	var pre int64
	for i, e := range r.engines {
		res.LookedUpTokens += e.stats.queries
		res.CachedTokens += e.stats.hits
		res.ComputedPromptTokens += e.stats.computed
		res.PulledTokens += e.stats.pulled
		if r.roles[i] == RolePrefill {
			pre += e.stats.computed
		}
	}
	if res.LookedUpTokens > 0 {
		res.HitRate = float64(res.CachedTokens) / float64(res.LookedUpTokens)
	}
	if res.ComputedPromptTokens > 0 {
		res.PrefillComputeShare = float64(pre) / float64(res.ComputedPromptTokens)
	}
	return res
}
