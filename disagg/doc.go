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
//     share of the prompt plus the free share of its decode capacity (open
//     requests against Config.DecodeQueueRequests). Prompt tokens do not
//     count as decode load: a split request's decode endpoint computes
//     none;
//  2. decides, from that endpoint's cached prefix as the index knows it,
//     whether to disaggregate: when the uncached prompt tokens it would
//     compute reach Config.NonCachedTokens (llm-d's prefix-based P/D
//     decider compares the same number), the request is split; below it
//     the decode endpoint prefills locally. With Config.MaxPrefillQueueTokens
//     the prefill load is checked too, as Dynamo's conditional
//     disaggregation does: when even the chosen prefill endpoint already
//     has that many prompt tokens in flight, the request stays local;
//  3. when split, picks the prefill endpoint among the other candidates
//     that may prefill (RolePrefill, RoleBoth, none) by the router's
//     filters and scorers: prefix cache and prefill load (in-flight
//     prompt tokens), with the prompts the decode pick rendered.
//
// One Decision carries both picks: the decode endpoint's, with the
// prefill endpoint's in Decision.Roles. Its FirstChunk and Done release
// both; the gateway releases it once.
//
// # Load accounting and speculative entries
//
// A split request charges its prefill endpoint its uncached prompt tokens
// and one open request until the first response chunk (the prefiller's
// one token has come back: kvroute.Request.PrefillOnly ends its part
// whole then, as llm-d releases its prefill pick), and its decode endpoint
// one open request and no prompt tokens until the request ends
// (kvroute.Request.RemotePrefill). A local request charges its decode
// endpoint as an ordinary pick does. Speculative index entries go where
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
// Decision.Roles holds a prefill pick, names it ("host:port", its ID) in
// HeaderPrefiller, as llm-d's router does: the decode pod's routing
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
// kvroute_disagg_decisions_total{outcome,reason}: outcome split (reason
// uncached) or local (reasons cached, no_tokens, no_prefill_endpoint,
// prefill_busy); kvroute_disagg_picks_total{role}: role decode (every
// request) and prefill (split requests); and
// kvroute_disagg_decode_without_events_total. Label values come from these
// fixed sets only.
package disagg
