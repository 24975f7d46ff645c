package disagg

import "github.com/prometheus/client_golang/prometheus"

// Outcomes of kvroute_disagg_decisions_total's outcome label.
const (
	outcomeSplit = "split" // a prefill endpoint computes the prompt, the decode endpoint decodes
	outcomeLocal = "local" // the decode endpoint prefills and decodes
)

// Reasons of kvroute_disagg_decisions_total's reason label, each with the
// outcome it goes with.
const (
	reasonUncached    = iota // split: uncached tokens at or above the threshold
	reasonCached             // local: the decode endpoint holds enough of the prompt
	reasonNoTokens           // local: the request was not tokenized (nothing to decide on)
	reasonNoPrefill          // local: no prefill endpoint is available
	reasonPrefillBusy        // local: the prefill-load rule (MaxPrefillQueueTokens)
	reasonLocalFaster        // local: the cost rule estimated local prefill faster
	reasonDecodeBusy         // split: below the threshold, the cost rule estimated splitting faster
	reasonAPI                // local: the request's API is not in Config.SplitAPIs
	reasonForcedTool         // local: a Messages request forcing a named tool, whose one-token prefill vLLM fails
	numReasons
)

var reasons = [numReasons]struct{ outcome, reason string }{
	reasonUncached:    {outcomeSplit, "uncached"},
	reasonCached:      {outcomeLocal, "cached"},
	reasonNoTokens:    {outcomeLocal, "no_tokens"},
	reasonNoPrefill:   {outcomeLocal, "no_prefill_endpoint"},
	reasonPrefillBusy: {outcomeLocal, "prefill_busy"},
	reasonLocalFaster: {outcomeLocal, "local_faster"},
	reasonDecodeBusy:  {outcomeSplit, "decode_busy"},
	reasonAPI:         {outcomeLocal, "api"},
	reasonForcedTool:  {outcomeLocal, "forced_tool"},
}

// metrics are the Profile's collectors; every label value comes from the
// fixed sets above.
type metrics struct {
	decisionsVec  *prometheus.CounterVec
	decisions     [numReasons]prometheus.Counter
	picksVec      *prometheus.CounterVec
	pickDecode    prometheus.Counter
	pickPrefill   prometheus.Counter
	withoutEvents prometheus.Counter
}

func newMetrics() *metrics {
	m := &metrics{
		decisionsVec: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kvroute_disagg_decisions_total",
			Help: "Prefill/decode decisions by outcome (split: a prefill endpoint computes the prompt; local: the decode endpoint prefills) and reason (uncached, decode_busy, cached, no_tokens, no_prefill_endpoint, prefill_busy, local_faster, api: an API outside the profile's splitAPIs, by default Messages and Responses; forced_tool: a Messages request forcing a named tool, whose one-token prefill vLLM answers with an error).",
		}, []string{"outcome", "reason"}),
		picksVec: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kvroute_disagg_picks_total",
			Help: "Endpoints picked by the prefill/decode profile, by role (decode: every request's destination; prefill: split requests' prefill endpoint).",
		}, []string{"role"}),
		withoutEvents: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kvroute_disagg_decode_without_events_total",
			Help: "Decisions whose decode endpoint's KV-event stream was not live: the decider used only what the index knew of it (the router's own speculative entries and events from before).",
		}),
	}
	for i, r := range reasons {
		m.decisions[i] = m.decisionsVec.WithLabelValues(r.outcome, r.reason)
	}
	m.pickDecode = m.picksVec.WithLabelValues(RoleDecode)
	m.pickPrefill = m.picksVec.WithLabelValues(RolePrefill)
	return m
}

func (m *metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.decisionsVec, m.picksVec, m.withoutEvents}
}
