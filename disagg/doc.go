// Package disagg is kvroute's prefill/decode disaggregation: the roles
// endpoints carry (kvroute.Endpoint.Role: RolePrefill, RoleDecode,
// RoleBoth or none), and Profile, a kvroute.Profile that picks each
// request in its two roles.
//
// # The profile step
//
// For each request the Profile
//
//  1. picks the decode endpoint among the candidates that may decode
//     (RoleDecode, RoleBoth, none), through the router's own stages: the
//     request is rendered once, its block keys looked up for every decode
//     candidate, the router's filters run (the affinity filter among them),
//     and the kept candidate with the best decode score wins: the cached
//     share of the prompt plus the free share of its decode capacity. A
//     decode endpoint's load is what it generates: its in-flight output
//     tokens (each request the Profile sent there charged its body's
//     max_tokens, else Config.DefaultOutputTokens, from the pick until the
//     request ends; Profile.DecodeLoad) against
//     Config.DecodeQueueOutputTokens, and its open requests against
//     Config.DecodeQueueRequests, whichever share is larger. Prompt tokens
//     do not count as decode load: a split request's decode endpoint
//     computes none. Options.DecodeScorers are added to the decode score,
//     as kvroute.Options.Scorers are to the router's own pick, which this
//     one replaces: kvroute's gateway and kvroute-epp pass session
//     affinity's scorer there (and the gateway its LoRA scorer), so a
//     conversation's next turn prefers the decode endpoint holding it;
//  2. decides, from that endpoint's cached prefix as the index knows it,
//     whether to disaggregate: below Config.NonCachedTokens uncached prompt
//     tokens (llm-d's prefix-based P/D decider compares the same number)
//     the decode endpoint prefills locally. At or above it the request is
//     split, unless a rule keeps it local: with
//     Config.MaxPrefillQueueTokens, when even the chosen prefill endpoint
//     already has that many prompt tokens in flight (Dynamo's conditional
//     disaggregation checks the prefill load the same way); with
//     Config.CostRule, when splitting is not estimated faster (below). A
//     request of an API outside Config.SplitAPIs (Config.SplitsAPI) stays
//     local, counted with reason api, so that no prefill endpoint is
//     charged a prompt the routing sidecar never sends it. The list must
//     name the APIs the decode pods' sidecar splits: by default
//     (DefaultSplitAPIs) completions and chat completions, which every
//     sidecar splits. kvroute's sidecar and the gateway's exchange split
//     Responses (/v1/responses) and Messages (/v1/messages) too, as
//     llm-d's newer sidecar does: the prefill request asks for one token
//     with max_output_tokens (Responses) or max_tokens (Messages), and a
//     vLLM whose API carries kv_transfer_params answers it with the
//     transfer parameters; an older one answers without them, and each
//     such request falls back to a local prefill. A Messages request
//     forcing a named tool (tool_choice {"type":"tool"}) stays local,
//     counted with reason forced_tool: vLLM decodes the generated text as
//     the tool call's JSON input, and answers the one-token prefill 500;
//  3. when split, picks the prefill endpoint among the other candidates
//     that may prefill (RolePrefill, RoleBoth, none) by the router's
//     filters and scorers: prefix cache and prefill load (in-flight
//     prompt tokens), with the prompts the decode pick rendered.
//
// # The cost rule
//
// With Config.CostRule a request at or above the threshold is split only
// when its estimated time to first token through the prefill endpoint is
// shorter than on its decode endpoint (Config.SplitTTFT, LocalTTFT; T is
// Config.PrefillTokensPerSecond, X Config.TransferTokensPerSecond):
//
//	split = (prefill endpoint's in-flight prompt tokens + its uncached tokens) / T
//	        + TransferLatency + decode endpoint's uncached tokens / X
//	local = decode endpoint's in-flight prompt tokens / T
//	        + its uncached tokens / T × (1 + min(DecodeStallWeight × its open requests, DecodeStallCap))
//
// The in-flight prompt tokens are the router's load accounting (the
// prompts each endpoint has yet to compute); the uncached tokens the index
// match. The last factor prices the interference of a local prefill on the
// decode endpoint's running requests: each of them waits as long as the
// prefill for its next token. At the default weight, 1, a second of their
// stall counts as a second of this request's wait (the rule minimises the
// latency all of them add): a long prompt stays local only on a decode
// endpoint with little running, or when the prefill endpoint's queue is
// longer than the stall. With no stall priced (a negative weight) the rule
// minimises the request's own time to first token, and a decode endpoint
// with no prompt queued prefills every long prompt itself (no transfer to
// pay) — which, in the routing simulation, queues the short follow-up turns
// that must prefill there behind documents and raises TTFT at every load.
// The priced stall is capped at Config.DecodeStallCap (default 4) times the
// prefill's own time: uncapped, tens of running requests outweigh any
// prefill queue, and on a fleet with few prefill endpoints every long
// prompt is split while their queue grows to tens of seconds (in the
// routing simulation's P/D study, a TTFT p90 of 2.5–14 s on two prefill and
// six decode engines, 0.9–3.4 s with the cap). Capped, a long prompt
// accepts a prefill queue of about four of its own prefills before it
// prefills on its decode endpoint.
// Decisions the rule keeps local are counted with reason local_faster.
//
// Below the threshold the rule decides too, with the stall priced at
// Config.BelowThresholdStallWeight (default 0.05) instead: a short prompt
// the threshold would keep local is split when its decode endpoint has
// prompt tokens queued, or enough running requests that its own prefill's
// stall on them costs more than the transfer, and the chosen prefill
// endpoint's queue is shorter (Config.SplitCheaperBelowThreshold). Such
// splits are counted with reason decode_busy. This keeps a busy decode
// endpoint's steps short (each step waits for every prompt chunk in it,
// the first tokens of split requests included) while the prefill pool
// has room, and leaves short prompts local once it has none. The weight is
// separate from DecodeStallWeight because it moves the other way: a small
// price lets short prompts leave a busy decoder, while long prompts, whose
// prefill stalls a decoder for its whole length, keep the full price and
// stay off the decoders. A negative weight turns this off: below
// NonCachedTokens nothing is split.
//
// One Decision carries both picks: the decode endpoint's, with the
// prefill endpoint's in Decision.Roles. Its FirstChunk and Done release
// both; the gateway releases it once. It names no fallback endpoints, even
// when the request asks for them (kvroute.Request.Fallbacks): the decode
// load the Profile charges stays on its decode pick, and a split request's
// prefill pick was made for that decoder, so a host that retries down a
// list gets the pick alone.
//
// # Load accounting and speculative entries
//
// A split request charges its prefill endpoint its uncached prompt tokens
// and one open request until the first response chunk (the prefiller's
// one token has come back: kvroute.Request.PrefillOnly ends its part
// whole then, as llm-d releases its prefill pick), and its decode endpoint
// one open request and no prompt tokens until the request ends
// (kvroute.Request.RemotePrefill). A local request charges its decode
// endpoint as an ordinary pick does. Either way the decode endpoint is
// charged the request's expected output tokens (its max_tokens, at most
// Config.DecodeQueueOutputTokens) in the Profile's own
// decode-load tracker until the request ends (kvroute.Decision.AtEnd: its
// Done, the request table's drop, or Release, once). Speculative index entries go where
// the blocks land: the prefill endpoint, which computes them, and the
// decode endpoint, which holds them once transferred.
//
// The index holds every endpoint's KV events whatever its role: a decode
// pod that publishes events is matched by them, one that publishes none
// (Options.EventsLive says its stream is not live) is decided on what the
// index knows of it, the router's own speculative entries, and counted.
//
// # Hosts
//
// A host forwards the request to Decision.Endpoint and, when
// Decision.Roles holds a prefill pick, names it in HeaderPrefiller by
// PrefillerHostPort (the host:port of its Address, else its ID), as
// llm-d's router does: the decode pod's routing
// sidecar sends the request to the prefiller first (one token, KV-transfer
// parameters asking for remote decode) and then to its local engine with
// the parameters the prefiller returned. The gateway (its "disagg" config
// block) and the ext_proc picker both do this; the gateway can instead run
// that two-step exchange itself (its exchange mode, with package
// disagg/sidecar's Exchange), ending the prefill pick's part at the
// prefiller's answer, so decode pods need no sidecar.
//
// # Metrics
//
// kvroute_disagg_decisions_total{outcome,reason}: outcome split (reasons
// uncached, decode_busy) or local (reasons cached, no_tokens, no_prefill_endpoint,
// prefill_busy, local_faster, api: an API outside Config.SplitAPIs,
// forced_tool: a Messages request forcing a named tool);
// kvroute_disagg_picks_total{role}: role decode (every
// request) and prefill (split requests); and
// kvroute_disagg_decode_without_events_total. Label values come from these
// fixed sets only.
package disagg
