package kvroute

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvroute/kvroute/approx"
)

const (
	decisionPrecise = iota
	decisionLoadOnly
	numDecisionKinds
)

// routerMetrics are the root package's metrics: llm-d's prefix-prediction
// histograms, plus kvroute's decision, fallback and cache-blind counters.
type routerMetrics struct {
	predicted       prometheus.Observer
	prompt          prometheus.Observer
	renderFallbacks prometheus.Counter
	decisions       [numDecisionKinds]prometheus.Counter
	blind           [numBlindReasons]prometheus.Counter
	modes           [3]prometheus.Counter // by approx.Mode
}

// tokenBuckets are token-count buckets from 16 to ~1M tokens.
var tokenBuckets = prometheus.ExponentialBuckets(16, 2, 17)

// newRouterMetrics registers the prediction histograms with predReg (reg
// with the configured prediction labels) and the rest with reg.
func newRouterMetrics(reg, predReg prometheus.Registerer) (*routerMetrics, error) {
	predicted := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "llm_d_epp_prefix_predicted_cached_tokens",
		Help:    "Prompt tokens the index predicted cached on the chosen endpoint (contiguous cached blocks × block size), once per tokenized routed request.",
		Buckets: tokenBuckets,
	}, []string{"endpoint_role"})
	prompt := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "llm_d_epp_prefix_prompt_tokens",
		Help:    "Prompt tokens of each tokenized routed request: the denominator of the predicted cached share.",
		Buckets: tokenBuckets,
	}, []string{"endpoint_role"})
	fallbacks := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "kvroute_router_render_fallbacks_total",
		Help: "Routed requests that went by load alone because they could not be tokenized (render failure, rendering disabled, prompt_embeds, or raw media in the prompt), once per request; a failed render of a request not routed is not counted.",
	})
	decisions := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kvroute_router_decisions_total",
		Help: "Routing decisions by kind: precise (cache information took part) or load_only.",
	}, []string{"kind"})
	blind := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kvroute_router_cache_blind_total",
		Help: "Load-only routing decisions with a cause: render_failed, render_disabled (no prompts and rendering off), events_disabled, prompt_embeds (a completions request with prompt embeddings, whose block keys the router cannot compute) or raw_media (a prompt whose multimodal items are raw media the engine resolves itself: a token-in request's content_parts).",
	}, []string{"reason"})
	modes := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kvroute_router_decision_mode_total",
		Help: "Routing decisions by where the chosen endpoint's cache information came from: precise (its KV events are live), approximate (the router's own earlier decisions) or blind (neither, or the request had no block keys).",
	}, []string{"mode"})
	if reg != nil {
		for _, c := range []prometheus.Collector{predicted, prompt} {
			if err := predReg.Register(c); err != nil {
				return nil, err
			}
		}
		for _, c := range []prometheus.Collector{fallbacks, decisions, blind, modes} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	m := &routerMetrics{
		predicted:       predicted.WithLabelValues("decode"),
		prompt:          prompt.WithLabelValues("decode"),
		renderFallbacks: fallbacks,
	}
	m.decisions[decisionPrecise] = decisions.WithLabelValues("precise")
	m.decisions[decisionLoadOnly] = decisions.WithLabelValues("load_only")
	for _, mode := range approx.Modes() {
		m.modes[mode] = modes.WithLabelValues(mode.String())
	}
	for i, name := range blindReasons {
		m.blind[i] = blind.WithLabelValues(name)
	}
	return m, nil
}
