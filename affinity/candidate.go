package affinity

// Candidate is what the filter needs to know about one candidate endpoint for
// the current request. The caller keeps a reusable slice of them.
type Candidate struct {
	// Score is the tier-weighted contiguous matched score for this request on
	// this endpoint (kvindex EndpointMatch.Score), as a float: not truncated.
	// NaN, infinite or negative scores count as no match.
	Score float64
	// InFlightTokens is the endpoint's committed in-flight load: uncached
	// prompt tokens of earlier requests that have not streamed a first chunk
	// (tokenload Tracker.Load). Negative values count as 0.
	InFlightTokens int64
	// LoadKnown says whether InFlightTokens is a real measurement. Endpoints
	// without a known load are left out of the gate's minimum; see
	// MissingSignalPolicy for a side with none.
	LoadKnown bool
	// RequestTokens is this request's projected uncached tokens on the
	// endpoint (tokenload UncachedTokens). Used only with
	// Config.IncludeRequestTokens and by the crowding rule
	// (Config.CrowdingRatio). Negative values count as 0.
	RequestTokens int64
	// OpenRequests is the number of requests open on the endpoint:
	// dispatched and not finished, so also those streaming their answers,
	// whose growing KV use evicts the endpoint's cached prefixes. Used by the
	// crowding rule (Config.CrowdingRatio) when LoadKnown. Negative values
	// count as 0.
	OpenRequests int64
}
