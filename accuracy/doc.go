// Package accuracy is kvroute's closed loop on the index's accuracy: for
// every request routed with a prediction, it compares the prompt tokens the
// index predicted the chosen endpoint holds with the prompt tokens the
// engine reports having served from its prefix cache (vLLM:
// usage.prompt_tokens_details.cached_tokens of the response, or of the final
// usage chunk of a stream), and exports, per endpoint:
//
//   - the error, predicted minus actual, in
//     kvroute_router_prediction_error_tokens (positive: the index held blocks
//     the engine had evicted; negative: the engine reused blocks the index
//     never heard of), with the stale and missing counts and the predicted
//     and actual token totals;
//   - whether the misses persist: more than Config.MissRatio of the
//     endpoint's latest Config.Window observed requests missed by more than
//     Config.ToleranceTokens. The endpoint is then marked inaccurate
//     (kvroute_router_endpoint_inaccurate, a warning, and with Config.Resync
//     a replay of its KV events, at most once per Config.ResyncInterval:
//     one held back by the interval is asked for once it has passed, should
//     the endpoint still be inaccurate)
//     until the share falls to half the ratio.
//
// A kvroute Router owns one Loop: its Decision carries the Prediction and
// hands it back with the engine's answer when the request ends
// (Decision.Done with the cached tokens). The loop holds nothing per
// request but the count of predictions in flight (Pending), so a request
// whose end never comes costs it nothing. The Router gives it its endpoint
// set (Loop.SetEndpoints): a request ending after its endpoint left is only
// counted (kvroute_router_prediction_late_total), so endpoints that come and
// go leave no window or series behind. An engine's answer that is no count
// of the prompt's tokens (negative, or more than the prompt holds) is not
// observed either, only counted (kvroute_router_prediction_invalid_total).
//
// A nil Registerer registers nothing; New registers every collector through
// telemetry.Set.Register, all or none (New fails and leaves nothing
// registered), and Close unregisters exactly what New registered, so a
// closed Loop can be built again on the same registry.
package accuracy
