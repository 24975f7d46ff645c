package kvroute

// Observe hands the engine's answer back to the router: actualCached is the
// number of prompt tokens the engine reports having served from its prefix
// cache for this request (vLLM: usage.prompt_tokens_details.cached_tokens
// of the response, or of the final usage chunk of a stream; vLLM leaves the
// field out when it reused nothing, which is 0). The router compares it with
// its prediction and exports, per endpoint, the error
// (kvroute_router_prediction_error_tokens), the stale and missing counts,
// and whether the misses persist (kvroute_router_endpoint_inaccurate, with a
// log line and, with Config.Accuracy.Resync, a replay of the endpoint's
// events). A decision is observed once; later calls and calls on a
// decision made without a prediction (rendering failed) return ok false and
// change nothing. Observe may be called before or after Done.
func (d *Decision) Observe(actualCached int) (o Observation, ok bool) {
	if d == nil || d.acc == nil || d.RenderErr != nil || d.PromptTokens == 0 {
		return Observation{}, false
	}
	if !d.observed.CompareAndSwap(false, true) {
		return Observation{}, false
	}
	if d.id != "" {
		d.acc.forget(d.id, d)
	}
	return d.acc.observe(d, actualCached), true
}

// Observe is Decision.Observe for the request committed with Request.ID
// reqID, for hosts that keep only the ID between their hooks. It must come
// before Router.Done for that ID (Done forgets it); an unknown ID is counted
// in kvroute_router_prediction_unknown_total and returns ok false. At most
// Config.Requests.MaxRequests decisions are addressable at once.
func (r *Router) Observe(reqID string, actualCached int) (Observation, bool) {
	d := r.acc.byID(reqID)
	if d == nil {
		r.acc.unknown.Inc()
		return Observation{}, false
	}
	return d.Observe(actualCached)
}

// EndpointInaccurate reports whether the endpoint's predictions currently
// miss persistently (see Decision.Observe).
func (r *Router) EndpointInaccurate(id string) bool { return r.acc.isInaccurate(id) }
