package tokenload

import "math"

// DefaultOpenRequestTokens is the load, in tokens, that one open request adds
// to its endpoint's token load in a kvroute Router's score by default.
const DefaultOpenRequestTokens int64 = 1024

// OpenRequestLoad returns the token-equivalent load of an endpoint's open
// requests: requests × perRequest, saturating at math.MaxInt64, 0 when
// either is <= 0.
//
// Committed tokens (Tracker.Load) only cover prefill work that has not
// produced a first chunk; once a request streams, it no longer counts,
// although it keeps running on the engine until Done: every engine step then
// carries its decode token and its KV blocks stay allocated, so an engine
// with many streaming requests admits new prompts later (and, when its KV
// cache is full, preempts). Adding this term to the committed tokens lets a
// load score tell a decode-saturated endpoint from an idle one.
func OpenRequestLoad(requests, perRequest int64) int64 {
	if requests <= 0 || perRequest <= 0 {
		return 0
	}
	if requests > math.MaxInt64/perRequest {
		return math.MaxInt64
	}
	return requests * perRequest
}
