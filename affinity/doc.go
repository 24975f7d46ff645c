// Package affinity implements kvroute's prefix-cache affinity filter and the
// calibration of the prefill throughput its load gate depends on.
//
// # The filter
//
// For each request the router knows, per candidate endpoint, how much of the
// request's prefix that endpoint already holds in its KV cache (the
// tier-weighted matched score from the block index) and how much committed
// prefill work is queued on it (uncached prompt tokens of earlier requests that
// have not streamed their first chunk yet, from package tokenload). The filter
// narrows the candidate set to the cache-warm ("sticky") endpoints, so that a
// group of requests sharing a long prefix keeps landing where its blocks are,
// while unrelated traffic spreads by load:
//
//  1. With at most one candidate, a request without a full block, or
//     AffinityThreshold <= 0, every candidate passes (OutcomeNotApplicable).
//  2. With probability ExplorationProbability every candidate passes
//     (OutcomeExploration).
//  3. An endpoint is sticky when score/totalBlocks >= AffinityThreshold. With no
//     sticky endpoint every candidate passes (OutcomeNoMatch).
//  4. The TTFT gate (only when MaxTTFTPenalty > 0 and some candidate is not
//     sticky): the estimated time to first token of an endpoint is its
//     committed in-flight tokens / PeakPrefillThroughput. When the least-loaded
//     sticky endpoint's estimate exceeds the least-loaded non-sticky endpoint's
//     by more than MaxTTFTPenalty, the warm set is saturated, stickiness is
//     broken and every candidate passes again (OutcomeLoadOverride); the
//     downstream load scorer then picks the least-loaded endpoint. The
//     comparison is relative: when every endpoint is busy the filter stays
//     sticky. With the defaults (15,928 tokens/s, 18 s) the gate fires when the
//     difference exceeds 286,704 tokens, and not at equality.
//  5. The crowding rule (only when CrowdingRatio > 0 and some candidate is not
//     sticky): a candidate's crowding cost is (this request's uncached
//     tokens on it + 1) × (its open requests + 1), open requests being those
//     dispatched and not finished, streaming answers included. When the
//     non-sticky side has fewer open requests at its least than the sticky
//     side and its least cost is below CrowdingRatio times the sticky side's
//     least, the warm endpoints are crowded: only the non-sticky candidates
//     of least cost pass (OutcomeCrowded). Requests streaming their answers
//     grow their engine's KV use and evict the prefixes it holds; the rule
//     moves a conversation off such an engine while its history is still
//     cheap to prefill elsewhere, which keeps the fleet's cache room even.
//     The cost is LMetric's (arXiv 2603.15202: a prefix-cache term times a
//     load term); the
//     rule applies it only to break stickiness, so prefix groups still stay
//     where their blocks are. With the ratio 1.5 the move may cost up to
//     half as much again as staying. With CrowdingMaxExtraPrefill > 0 a
//     candidate is a destination only when its uncached tokens exceed the
//     warmest sticky candidate's by at most CrowdingMaxExtraPrefill ×
//     PeakPrefillThroughput: a move never re-prefills more than that, so a
//     request whose warm endpoint holds a long shared context stays —
//     unless the crowding is severe: when the sticky side's fewest open
//     requests + 1 reach CrowdingUnboundRatio (default 16) times the
//     non-sticky side's fewest + 1, the bound is lifted. So many requests
//     streaming on one engine exhaust its KV blocks and get preempted (the
//     TTFT gate sees only in-flight prefill, near zero when the prompts are
//     cached), and re-prefilling the shared context elsewhere costs less.
//  6. Otherwise only the sticky endpoints pass (OutcomeSticky).
//
// These are the semantics of the llm-d router's prefix-cache-affinity-filter
// (throughput TTFT source) with three deliberate differences, documented on
// the types involved: the matched score is compared as a float (the
// reference truncates the weighted sum to an integer, which puts a prompt
// cached entirely in the CPU tier below the 0.8 threshold for most lengths),
// a missing load signal follows an explicit MissingSignalPolicy instead of
// being replaced by zero, and the crowding rule (step 5), which llm-d's
// filter does not have, is on by default (a CrowdingRatio of 0 turns it off). The opt-in IncludeRequestTokens adds the current
// request's own uncached tokens to every estimate (OutcomeRequestLoadOverride
// when the gate fires on that estimate).
//
// Filter.Apply is called once per request, appends the indices of the passing
// candidates to a caller-provided slice, allocates nothing and is safe for
// concurrent use. Every decision is counted in
// llm_d_epp_prefix_cache_affinity_filter_decisions_total{outcome} when a
// prometheus.Registerer is given. A nil Registerer registers nothing; New
// registers the counter through telemetry.Set.Register (New fails and leaves
// nothing registered), and Close unregisters it, so a closed Filter can be
// built again on the same registry. Filters sharing one registry share the
// counter: a Filter that finds it already registered by another reuses it,
// and the counter stays registered until the last of the Filters sharing it
// closes, whichever registered it.
//
// # Calibration
//
// PeakPrefillThroughput turns the measured TTFTs of prompts of exactly
// CHUNK_SIZE random tokens (every one a prefix-cache miss) into the
// throughput the gate divides by: chunk / median TTFT. CHUNK_SIZE must equal
// the engine's effective --max-num-batched-tokens. The command in
// examples/calibrate measures it against an OpenAI-compatible endpoint and
// prints PEAK_PREFILL_THROUGHPUT=<value>; copy the value into
// Config.PeakPrefillThroughput. Re-measure whenever tensor parallelism, chunk
// size, quantization, max model length, the engine or its version changes.
package affinity
