// Package sidecar is the routing sidecar of a decode pod in
// prefill/decode (P/D) disaggregated serving, and the two-step exchange it
// runs, exported so that kvroute's gateway can run it itself.
//
// # The protocol
//
// The router picks a decode endpoint and, when it decides to split, a
// prefill endpoint whose "host:port" it sends in the x-prefiller-host-port
// header (PrefillerHeader) to the decode pod, as llm-d's router does (with
// the same value under llm-d's current name, PrefillerHeaderLLMD, which the
// sidecar reads when the former is absent; of a comma-separated list, the
// first, as llm-d's sidecar takes it). The value must be exactly a host and
// a port (ValidTarget). The sidecar in front of the decoder then:
//
//  1. sends the client's request to the prefiller with max_tokens 1 (and
//     min_tokens 1 when it has one; on /v1/responses max_output_tokens 1,
//     the Responses API's limit, and store false), stream false, no
//     stream_options, and kv_transfer_params
//     {"do_remote_decode": true, "do_remote_prefill": false, remote_* null}
//     (PrefillBody). A vLLM prefiller with a KV connector (NIXL) computes the
//     prompt, keeps the request's blocks for the decoder to read, and answers
//     with kv_transfer_params {"do_remote_prefill": true,
//     "do_remote_decode": false, "remote_engine_id", "remote_block_ids",
//     "remote_host", "remote_port", "tp_size", …} describing where the
//     blocks are (remote_host/remote_port are the connector's side channel,
//     not the HTTP port);
//  2. sends the original request (its own stream, max_tokens and
//     stream_options) to the local decoder with those kv_transfer_params
//     (DecodeBody), copied as an opaque object so fields of other
//     connectors pass untouched. The decoder pulls the blocks, caches them,
//     computes only the last prompt token, and generates. Its response,
//     streamed or not, is the client's response.
//
// Both halves carry the same X-Request-Id (the client's, or a fresh one).
//
// The routes split are /v1/completions, /v1/chat/completions,
// /v1/responses and /v1/messages (SplitPath), as llm-d's newer sidecar
// splits them; every other request (/v1/messages/count_tokens among them)
// goes to the decoder as it came. A Messages request's prefill body asks
// for its one token with max_tokens, the Messages API's required limit;
// vLLM's Messages API reads kv_transfer_params into the chat completion it
// serves the message as and answers them at the top of its message, as
// the OpenAI routes do (a vLLM whose Messages API predates them answers
// without them, and the request falls back to a local prefill,
// ReasonBadResponse). vLLM's Responses API reads and
// answers kv_transfer_params since 2026 (vllm-project/vllm#37424); an
// older prefiller answers without them, and the request falls back to a
// local prefill (ReasonBadResponse). A Responses request that names a
// previous_response_id refers to a response stored by the engine that
// answered it, which the prefiller is not: it answers 404, and the request
// falls back (ReasonStatus).
//
// The client's body is read as vLLM reads it (FastAPI hands its bytes to
// Python's json.loads), as kvroute's gateway and ext_proc picker read it:
// past one leading UTF-8 byte order mark, and a UTF-16 or UTF-32 body
// (json.detect_encoding's rules) decoded; both halves get the UTF-8 JSON
// it encodes. A Handler charges a wide body's UTF-8 copy to its budget of
// Config.MaxBodyBytesInFlight (503 body_budget without room), as it does
// the other copies a split makes (the parsed members and the prefill body
// during the prefill step, the decode body, in place of the client's,
// while the decoder answers): a split whose copies find no room, even
// alone when its body is over a third of the budget, is not sent to the
// prefiller but to the decoder as it came, for a local prefill
// (ReasonBodyBudget), unless going as it came needs a copy too (a wide
// body, or one with kv_transfer_params of its own to drop), which is
// answered 503 body_budget then. It answers
// 400 bad_body, naming the encoding, a wide body that is not text in it. A
// request it does not split goes to the decoder as it came, but for the
// client's own kv_transfer_params (below).
//
// # A client's transfer parameters
//
// vLLM's KV connectors act on a request's kv_transfer_params: a client's
// do_remote_prefill with a remote_host of its choosing would make the
// decoder pull KV blocks from that address. A Handler therefore removes
// the member a client's body carries from every request, as kvroute's
// gateway and ext_proc picker do: a split request gets the exchange's
// (the prefiller's, or none on a fallback), any other one none, the body
// read as vLLM reads it and the copy without the member charged to
// Config.MaxBodyBytesInFlight (503 body_budget without room). A body that
// is not one JSON object goes as it came, but on a route vLLM reads the
// member from (SplitPath's and /inference/v1/generate, POST), where it is
// answered 400 bad_body as a split request's is. Each request whose
// member was removed is counted in
// kvroute_sidecar_client_transfer_params_removed_total.
// Config.AllowClientKVTransferParams keeps the member on the requests the
// Handler does not split, a fallback's included (the decoder gets the body
// it would get with no prefiller named), behind a trusted component that
// sets it itself.
//
// # Failures
//
// llm-d's sidecar answers the prefiller's error status to the client. This
// one instead falls back to a local prefill: if the header is not a
// host:port, Options.AllowTarget refuses it, the prefiller is unreachable, does not answer within
// Config.PrefillTimeout, answers a non-2xx status, or answers without
// usable kv_transfer_params, the original request goes to the decoder
// unchanged and the decoder prefills it itself. A Messages request forcing
// a named tool (tool_choice {"type":"tool"}) is not sent to the prefiller
// at all: vLLM decodes the generated text as the tool call's JSON input,
// which one token is not, and answers such a prefill 500. Nor is a
// request whose copies find no room in the Handler's budget of body bytes
// in flight (ReasonBodyBudget), unless its target was unusable anyway: a
// bad or refused target is counted as such whatever the budget. Each
// fallback is counted by
// reason (Reasons) in kvroute_sidecar_prefill_fallbacks_total. A failure of
// the transfer itself (blocks gone from the prefiller) is the decoder's to
// handle: vLLM's kv_load_failure_policy "recompute" (the default)
// recomputes the missing blocks locally, "fail" fails the request.
//
// # Metrics
//
// kvroute_sidecar_requests_total{outcome="split|fallback|plain"},
// kvroute_sidecar_prefill_fallbacks_total{reason}, and
// kvroute_sidecar_prefill_duration_seconds, registered on
// Options.Registerer (nil registers none; a failed NewExchange leaves
// none registered; Close unregisters them). A Handler also counts the
// requests whose client's own kv_transfer_params it removed in
// kvroute_sidecar_client_transfer_params_removed_total, and the
// requests it answers with an error of its own or drops, by reason, in
// kvroute_sidecar_refused_requests_total{reason="body_too_large|bad_body|body_timeout|body_budget|client_gone|client_stalled|decoder_unreachable|decoder_timeout|decoder_closed|decoder_error|decoder_broken"}
// (the decoder_* reasons but decoder_broken count the 502s by the kind of
// the decoder's failure, which the client is told in a fixed text; the
// error itself, naming the decoder's address, goes to the log only;
// decoder_broken counts a decoder response that broke off after its
// header, whose cut the client sees as an aborted response). A request refused
// before its outcome was known (the body_* and bad_body reasons, and
// client_gone while its body was read or its prefill step ran) is counted
// there only; a decoder_* 502 or decoder_broken, and client_gone while the decoder was
// answering, befall a request kvroute_sidecar_requests_total has already
// counted by its outcome, so it is in both. client_stalled counts a
// response cut because its client took nothing of it for
// Config.ResponseWriteTimeout (each write's deadline, as kvroute's
// gateway has): a client that stops reading cannot hold its body's share
// of Config.MaxBodyBytesInFlight, and its decoder request, for as long as
// it keeps the connection; it too is in both.
//
// # Use from a gateway
//
// A gateway that wants to run the exchange itself (instead of a sidecar on
// each decode pod) builds one Exchange and, for a split decision, calls
// Prefill with the prefill endpoint, the client's path, headers and body
// (PrefillURLWithin when it knows the endpoint's base URL, so that its
// scheme and path prefix are kept, and charging its copies to the
// gateway's budget of bodies in flight);
// it then sends Result.DecodeBody to the decode endpoint with
// Result.RequestID in X-Request-Id, exactly as it would forward an
// ordinary request. Result.Split and Result.Fallback say what happened.
// kvroute's gateway does exactly this in its exchange mode (the "mode" key
// of its "disagg" block), with its metrics on the gateway's registry.
//
// The binary cmd/kvroute-sidecar serves a Handler. The package adds no
// module dependency.
package sidecar
