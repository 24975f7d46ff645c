// Package tokenload keeps kvroute's in-flight load per endpoint and scores
// endpoints by it.
//
// # Accounting
//
// The load an endpoint carries is the prefill work queued on it: the uncached
// prompt tokens of requests dispatched to it that have not streamed their
// first response chunk yet, plus the number of requests still open. A request
// moves through three events, each driven by the gateway:
//
//	h := tracker.Dispatch("10.0.0.1:8000", uncached) // tokens += uncached, requests += 1
//	h.FirstChunk()                                    // tokens -= uncached (prefill is done)
//	h.Done()                                          // requests -= 1, and tokens if no chunk came
//
// Every release happens exactly once, however often and however concurrently
// FirstChunk and Done are called, and counters are clamped at zero. The handle
// captures the endpoint's counter instance: after Remove (the endpoint left
// the pool) a late release touches only the orphaned counters, never those of
// an endpoint re-added under the same ID. The handle is the request's
// accounting entry, held by the caller for the request's lifetime.
//
// # By request ID
//
// Hosts that see a request's stages in separate callbacks with only its ID
// in hand (Envoy ext_proc) file the handle in a RequestTable:
//
//	table.Register("req-42", h) // refused while "req-42" is in flight
//	table.FirstChunk("req-42")  // = h.FirstChunk()
//	table.Done("req-42")        // = h.Done(), and the ID is forgotten
//
// Unknown and repeated IDs are counted and change nothing. The table is
// bounded by a maximum number of entries and a TTL: a request whose Done
// never comes is released and dropped (counted, and warned about once a
// minute) rather than held forever, within its TTL on the injected clock
// even when nothing more is registered (a timer armed while the table is
// not empty; Close stops it). The table files any Handle, not only an
// Inflight: a kvroute Router files its Decisions, so a dropped request ends
// whole (its load and its prediction), and Get finds one by ID.
//
// UncachedTokens computes a request's projected uncached tokens on one
// endpoint from its block-index match.
//
// # Scoring
//
// Score is the token-load scorer: 1 − min(tokens, Q)/Q with tokens = committed
// in-flight tokens + this request's projected uncached tokens on the endpoint
// and Q = 4,194,304 by default (128 requests × 32K tokens). It is absolute,
// not normalized across candidates: two endpoints above Q both score 0.
// OpenRequestLoad turns an endpoint's open requests into token-equivalent
// load; a kvroute Router adds it to the committed tokens it scores, so that
// an endpoint still streaming many answers does not look idle.
//
// # Metrics
//
// With a prometheus.Registerer the tracker exports the gauges
// llm_d_epp_inflight_tokens{endpoint_name} and
// llm_d_epp_inflight_requests{endpoint_name}, read from the live counters at
// scrape time, so the request path only does atomic additions; a removed
// endpoint's series disappear. A nil Registerer registers nothing;
// NewTracker and NewRequestTable register every collector through
// telemetry.Set.Register, all or none (they fail and leave nothing
// registered), and Close unregisters exactly what they registered, so a
// closed Tracker or RequestTable can be built again on the same registry.
package tokenload
