// Package replay asks a KV-event publisher for the batches a subscriber
// missed, and serves such requests for Go publishers and tests.
//
// vLLM keeps the last batches it published (10,000 by default) and answers
// replay requests on a ROUTER socket: a request is [empty delimiter, start
// sequence as 8 bytes big-endian]; the reply is one message per buffered batch
// with a sequence at or after the start, then an END sentinel whose sequence
// is ff×8 and whose payload is empty. vLLM releases before vllm#45177 (and
// SGLang) reply [seq, payload]; later ones put the topic first
// ([topic, seq, payload]).
//
// Client replays over a fresh DEALER per attempt (never REQ, never a fixed
// identity), accepts both reply layouts, bounds every attempt by an idle
// deadline (2 s, re-armed by incoming data) and the whole replay by an end to
// end deadline (2 min), resumes after an interruption from the next sequence
// it expects, gives up after 3 attempts without progress, and shares a
// process-wide Limiter (8 concurrent replays by default). Failures are *Error
// values whose Op is the operation label of the
// llm_d_epp_kv_cache_events_zmq_errors_total metric; an attempt the
// caller's context cut off is marked Error.Canceled (the caller gave the
// replay up, the publisher did not fail it), and kvevents does not count
// it.
//
// vLLM's ROUTER has a send high-water mark (libzmq's default, 1,000 queued
// messages) and drops replies beyond it, so a replay of a few thousand
// batches can arrive with holes. vLLM's protocol has no way to ask for a
// window (a request names only its start), so the client asks again: at the
// first reply beyond the next expected sequence it stops reading, closes the
// socket and, after Backoff (no back-to-back requests; the replay slot is
// released meanwhile), requests from the first missing sequence. Each round
// then delivers at least what the send queue holds, nothing delivered is
// asked for again, and the rounds are bounded (MaxHoleRetries, default 32,
// besides the attempts-without-progress rule and the deadline); a replay that
// runs out of them fails with OpHole and reports in Result.Highest how far
// the publisher had got, so the caller knows what is still missing.
//
// Buffer is a ring of the last batches a Go publisher sent, and Server answers
// replay requests from it in either layout (ServerConfig.SendHWM makes it drop
// replies past a send high-water mark as vLLM's ROUTER does).
//
// Metrics: a Client has none; a Server registers its kvroute_replay_server_*
// metrics (NewServer is its New). A nil Registerer registers nothing. New
// registers every collector of the component through Set.Register, all or
// none (New fails and leaves nothing registered). Close unregisters exactly
// what New registered, so a closed component can be built again on the same
// registry.
package replay
