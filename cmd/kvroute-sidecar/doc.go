// Command kvroute-sidecar is the routing sidecar of a decode pod in
// prefill/decode disaggregated serving (package disagg/sidecar): it listens
// in front of the pod's decode engine, and for a request whose
// x-prefiller-host-port header (or llm-d's current x-llm-d-prefiller-host-port)
// names a prefill endpoint it first sends the
// request to that prefiller (max_tokens 1, stream false, kv_transfer_params
// with do_remote_decode), then to the local decoder with the
// kv_transfer_params the prefiller returned. Without the header, or when
// the prefill step fails (unreachable, slower than --prefill-timeout, an
// error status, no transfer parameters), the request goes to the decoder
// as it came and the decoder prefills it; fallbacks are counted by reason
// on /metrics of --metrics-port. Both listeners close a keep-alive
// connection that waits longer than --idle-timeout (default 2m) for its
// next request. A request body must arrive within --body-read-timeout
// (default 30s; 408 past it), be at most --max-body-bytes (413), and find
// room in --max-body-bytes-in-flight, the bytes all clients' bodies (and
// the copies a split makes of them: about three times a body during its
// prefill step) may hold together (503 with Retry-After; a split whose
// copies find no room goes to the decoder as it came, a local prefill
// counted as body_budget); a client that takes nothing of its
// response for --response-write-timeout (default 1m, restarted at every
// write) has it cut; each refusal and cut is counted by reason in
// kvroute_sidecar_refused_requests_total. What the HTTP server does
// before the handler sees a request is counted too, as the gateway counts
// it: a connection closed because its request header did not arrive
// within 10s in kvroute_sidecar_header_timeouts_total, a request refused
// unread (a malformed request line or header, a header over the size
// limit) in kvroute_sidecar_server_refused_requests_total.
//
// A client's own kv_transfer_params are removed from every request, split
// or not (counted in kvroute_sidecar_client_transfer_params_removed_total):
// vLLM's KV connector would pull blocks from the remote_host a client
// names. --allow-client-kv-transfer-params keeps them on the requests the
// sidecar does not split, a failed prefill's local fallback included,
// behind a trusted component that sets them.
//
// The sidecar posts request bodies to whatever prefiller the header names,
// so by default only a trusted router may reach its port. With
// --allowed-prefiller-networks (the pod network's CIDRs) and optionally
// --allowed-prefiller-ports, a prefiller outside them, or one named by a
// host name, is never contacted: the decoder prefills locally and the
// fallback is counted as not_allowed. It plays the part of llm-d's routing
// sidecar's SSRF protection, from static networks instead of the pool's
// pods.
//
//	go run ./cmd/simengine --port 8001 --pd-role decode &
//	go run ./cmd/simengine --port 8002 --pd-role prefill &
//	go run ./cmd/kvroute-sidecar --port 8000 --decoder http://127.0.0.1:8001
//	curl -H 'x-prefiller-host-port: 127.0.0.1:8002' -H 'Content-Type: application/json' \
//	  -d '{"model":"sim-model","prompt":"hello","max_tokens":8}' http://127.0.0.1:8000/v1/completions
//
// The flags play the part of llm-d's routing sidecar's --port and
// --vllm-port (here a URL). See -help.
package main
